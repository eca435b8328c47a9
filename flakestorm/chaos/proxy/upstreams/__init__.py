"""Where the proxy sends a call once its faults are decided: the upstream seam.

:class:`~.base.Upstream` is one method wide, ``send(request) -> HttpResponse`` (whole or streamed).
The proxy builds one at start-up (:func:`~.registry.local_upstream`): the network
(:class:`~.network.NetworkUpstream`, kept-alive ``http.client`` connections), wrapped by
:class:`~.cassette.CassetteRecording` when recording, under the mock LLM
(:class:`~.mock_llm.MockLlm`) or a cassette's replay (:class:`~.cassette.CassetteReplay`)
when ``llm_upstream`` names one.
"""

"""The checks an invariant makes of a reply: the registry of invariant types and what they use
(similarity, PII, refusal phrases, the valid_json schema checker)."""

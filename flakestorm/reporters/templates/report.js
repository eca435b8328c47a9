(function () {
  "use strict";
  var words = ["failed", "critical"];
  var boxes = {};
  words.forEach(function (word) {
    boxes[word] = document.getElementById("filter-" + word);
  });

  function hidden(el, failed, critical) {
    return (failed && el.getAttribute("data-bad") !== "1") ||
      (critical && el.getAttribute("data-severity") !== "critical");
  }

  function apply() {
    var failed = boxes.failed.checked;
    var critical = boxes.critical.checked;
    var items = document.querySelectorAll("[data-filterable]");
    var shown = 0;
    for (var i = 0; i < items.length; i++) {
      var hide = hidden(items[i], failed, critical);
      items[i].hidden = hide;
      if (!hide && items[i].classList.contains("cell")) {
        shown += 1;
      }
    }
    var active = words.filter(function (word) { return boxes[word].checked; });
    document.body.setAttribute("data-filter", active.join(" ") || "none");
    document.getElementById("filter-count").textContent =
      active.length ? shown + " cells shown" : "";
    return active;
  }

  function fromHash() {
    var wanted = decodeURIComponent(location.hash.replace(/^#/, "")).split(/[+,& ]/);
    if (wanted.indexOf("failed") < 0 && wanted.indexOf("critical") < 0) {
      return;
    }
    words.forEach(function (word) {
      boxes[word].checked = wanted.indexOf(word) >= 0;
    });
  }

  words.forEach(function (word) {
    boxes[word].addEventListener("change", function () {
      var active = apply();
      var hash = active.length ? "#" + active.join("+") : "";
      try {
        history.replaceState(null, "", location.pathname + location.search + hash);
      } catch (err) {
        // Some browsers refuse history changes on file:// pages; the filter still applies.
      }
    });
  });
  window.addEventListener("hashchange", function () {
    fromHash();
    apply();
  });
  fromHash();
  apply();
})();

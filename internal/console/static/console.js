// Patchline admin console: copy buttons, and the expiry choices of the
// key form. Everything works without it.
(function () {
  "use strict";

  function announce(text) {
    var status = document.querySelector(".copy-status");
    if (status) {
      status.textContent = text;
    }
  }

  document.addEventListener("click", function (ev) {
    var button = ev.target.closest("[data-copy]");
    if (!button) {
      return;
    }
    var input = document.getElementById(button.getAttribute("data-copy"));
    if (!input) {
      return;
    }
    var done = function () {
      announce("Copied to the clipboard.");
    };
    var fallback = function () {
      input.focus();
      input.select();
      try {
        if (document.execCommand("copy")) {
          done();
          return;
        }
      } catch (e) {
        // fall through
      }
      announce("Selected: press Ctrl+C or ⌘C to copy.");
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(input.value).then(done, fallback);
    } else {
      fallback();
    }
  });

  // A privileged key must expire within 90 days: keep the choices that
  // would be refused out of reach while "Privileged" is ticked.
  var privileged = document.getElementById("key-privileged");
  var expiry = document.getElementById("key-expiry");
  if (privileged && expiry) {
    var sync = function () {
      ["", "365d"].forEach(function (value) {
        var option = expiry.querySelector('option[value="' + value + '"]');
        if (option) {
          option.disabled = privileged.checked;
        }
      });
      if (privileged.checked && (expiry.value === "" || expiry.value === "365d")) {
        expiry.value = "90d";
      }
    };
    privileged.addEventListener("change", sync);
    sync();
  }
})();

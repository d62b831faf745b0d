// Completion page: hand the HIT back to MTurk, or send the Prolific participant back.
(function () {
  "use strict";
  var form = document.getElementById("mturk-submit");
  if (form) { form.submit(); return; }
  var back = document.querySelector("[data-auto-redirect]");
  if (back) { window.setTimeout(function () { window.location.assign(back.href); }, 1500); }
})();

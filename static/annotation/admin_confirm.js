// Admin buttons that ask before they act: <button data-confirm="Question?">. A script file
// rather than an inline onclick, which the production CSP (script-src 'self') refuses to run,
// so the button acted without asking.
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-confirm]") : null;
    if (button && !window.confirm(button.getAttribute("data-confirm"))) {
      event.preventDefault();
    }
  });
})();

// rota dashboard: an opt-in refresh of the page every 10 seconds, remembered for this tab
// (sessionStorage). Everything else works without script.
(function () {
  "use strict";
  var KEY = "rota.autoRefresh", box = document.getElementById("auto-refresh"), timer = null;
  if (!box) { return; }
  function apply() {
    if (timer !== null) { clearTimeout(timer); timer = null; }
    if (box.checked) { timer = setTimeout(function () { location.reload(); }, 10000); }
  }
  box.checked = sessionStorage.getItem(KEY) === "1";
  box.addEventListener("change", function () {
    sessionStorage.setItem(KEY, box.checked ? "1" : "0");
    apply();
  });
  apply();
}());

(function () {
  var d = document, last = 0;
  function post(force) {
    var h = Math.ceil(d.documentElement.getBoundingClientRect().height);
    if (force === true || h !== last) {
      last = h;
      parent.postMessage({ type: "partner-api-docs-height", height: h }, "*");
    }
  }
  d.querySelectorAll("img").forEach(function (i) {
    if (i.complete && !i.naturalWidth) i.remove();
    else i.addEventListener("error", function () { i.remove(); });
  });
  d.addEventListener("change", function (e) {
    var r = e.target, c = r.closest && r.closest(".card"), a = c && c.querySelector(".cta");
    if (!a || !r.dataset.url) return;
    a.href = r.dataset.url;
    a.querySelector(".cta-text").textContent = r.dataset.cta;
  });
  if (window.ResizeObserver) new ResizeObserver(post).observe(d.documentElement);
  addEventListener("load", function () { post(true); });
  addEventListener("resize", post);
  post(true);
})();

"""The stylesheet and the small script of the static HTML report (no external resources)."""

STYLE = """
:root { --fg: #1d1d1f; --muted: #6b6b70; --line: #d9d9de; --bg-soft: #f5f5f7;
        --oracle: #b3261e; --ok: #1b7f3b; --bad: #b3261e; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       margin: 0; }
header.top { background: #20232a; color: #fff; padding: 10px 20px; display: flex; gap: 18px;
             align-items: baseline; flex-wrap: wrap; }
header.top a { color: #9ecbff; text-decoration: none; }
header.top h1 { font-size: 18px; margin: 0 12px 0 0; }
main { padding: 16px 20px 40px; max-width: 1800px; }
h2 { margin-top: 28px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 7px; text-align: right; vertical-align: top; }
th { background: var(--bg-soft); cursor: pointer; position: sticky; top: 0; }
td.l, th.l { text-align: left; }
.badge { display: inline-block; border-radius: 4px; padding: 0 5px; font-size: 11px;
         font-weight: 600; margin-left: 4px; vertical-align: middle; }
.badge.oracle { background: var(--oracle); color: #fff; }
.badge.p-orchestration { background: #d6e6f5; }
.badge.p-semi-orchestration { background: #ffe3c7; }
.badge.p-any-to-any { background: #d4efd4; }
.badge.p-baseline, .badge.p-unknown { background: #e7e7e7; }
tr.oracle td { background: #fdeceb; }
.controls { display: flex; gap: 10px; align-items: center; margin: 8px 0; flex-wrap: wrap; }
.controls input[type=search] { padding: 4px 8px; min-width: 260px; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 16px; }
figure { margin: 0; border: 1px solid var(--line); padding: 8px; background: #fff; }
figure img { max-width: 100%; height: auto; }
.stand-in-figure { max-width: 760px; margin-top: 12px; }
figcaption { color: var(--muted); font-size: 12px; }
.example-input { display: grid; grid-template-columns: repeat(2, minmax(260px, 1fr)); gap: 18px; }
.panel { border: 1px solid var(--line); border-radius: 6px; padding: 10px; background: #fff; }
.panel img, .card img { width: 100%; height: auto; display: block; background: var(--bg-soft);
                        object-fit: contain; }
.panel img { max-height: 420px; } .card img { max-height: 340px; }
.scroll { overflow-x: auto; max-width: 100%; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr)); gap: 14px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 10px; background: #fff; }
.card.oracle { border: 2px solid var(--oracle); }
.card h3 { margin: 0 0 6px; font-size: 15px; }
.narration { white-space: pre-wrap; background: var(--bg-soft); padding: 6px; border-radius: 4px; }
.failure { color: var(--bad); font-weight: 600; }
.missing { color: var(--muted); font-style: italic; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 6px 0; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; }
table.records { font-size: 12px; margin: 2px 0; } table.records td { vertical-align: top; }
dl.kv dd { min-width: 0; }
.run-tables { display: grid; grid-template-columns: repeat(auto-fill, minmax(480px, 1fr));
              gap: 6px 18px; }
pre { white-space: pre-wrap; word-break: break-word; background: var(--bg-soft); padding: 6px;
      font-size: 12px; max-height: 340px; overflow: auto; }
audio { width: 100%; margin-top: 6px; }
.scoreline { font-size: 12px; color: var(--muted); margin: 6px 0; }
.st-invalid { color: var(--bad); } .st-missing_output { color: var(--muted); }
.st-error { color: var(--bad); font-style: italic; }
nav.pager { display: flex; justify-content: space-between; margin: 10px 0; }
.note { color: var(--muted); }
.incomplete { color: var(--bad); font-weight: bold; }
"""

SCRIPT = """
(function () {
  function apply(ctrl) {
    var target = document.querySelector(ctrl.getAttribute('data-target'));
    if (!target) return;
    var box = ctrl.closest('.controls');
    var q = (box.querySelector('input[type=search]') || {value: ''}).value.toLowerCase();
    var sel = box.querySelector('select');
    var group = sel ? sel.value : '';
    var hideOracle = box.querySelector('input.hide-oracle');
    var items = target.querySelectorAll('[data-item]');
    var shown = 0;
    items.forEach(function (el) {
      var ok = (el.getAttribute('data-search') || el.textContent).toLowerCase().indexOf(q) >= 0;
      if (ok && group) ok = el.getAttribute('data-paradigm') === group;
      if (ok && hideOracle && hideOracle.checked) ok = el.getAttribute('data-oracle') !== '1';
      el.style.display = ok ? '' : 'none';
      if (ok) shown++;
    });
    var count = box.querySelector('.count');
    if (count) count.textContent = shown + ' / ' + items.length;
  }
  document.querySelectorAll('.controls [data-target]').forEach(function (ctrl) {
    ctrl.addEventListener('input', function () { apply(ctrl); });
    ctrl.addEventListener('change', function () { apply(ctrl); });
  });
  document.querySelectorAll('table.sortable th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var table = th.closest('table'); var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
      var asc = th.getAttribute('data-asc') !== '1';
      th.setAttribute('data-asc', asc ? '1' : '0');
      function key(r) { var t = r.cells[idx].getAttribute('data-v') || r.cells[idx].textContent;
                        var n = parseFloat(t); return isNaN(n) ? t : n; }
      rows.sort(function (a, b) { var x = key(a), y = key(b);
        if (typeof x === 'number' && typeof y === 'number') return asc ? x - y : y - x;
        return asc ? String(x).localeCompare(String(y)) : String(y).localeCompare(String(x)); });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
})();
"""

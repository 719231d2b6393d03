//! The page: head, style, the sections in order, the sorting script.

use std::fmt::Write;

use crate::charts;
use crate::svg::esc;
use crate::{Document, Table};

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;font-size:12px}td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}\
td.t,th.t{text-align:left}th{cursor:pointer;background:#f4f4f4}th.sorted{background:#dde8f4}\
dl{display:grid;grid-template-columns:max-content auto;gap:2px 16px}dt{color:#555}dd{margin:0;font-family:ui-monospace,monospace;word-break:break-all}\
svg text{font:11px system-ui,sans-serif;fill:#222}svg .axis{stroke:#888;stroke-width:1}svg .grid{stroke:#e5e5e5;stroke-width:1}\
svg .hbm{stroke:#d00;stroke-width:2;stroke-dasharray:6 3}svg rect:hover{opacity:.75}\
.legend span{display:inline-block;margin-right:14px;font-size:12px}.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px}\
.note{color:#555;font-size:12px}.scroll{overflow-x:auto}";

/// Sorts a table by the clicked column: numbers by `data-v`, text by its content; a second
/// click reverses. Marks the body `data-ready="1"` once it has run (the browser test reads it).
const SCRIPT: &str = "document.querySelectorAll('table.sortable').forEach(function(t){\
t.querySelectorAll('th').forEach(function(h,i){h.addEventListener('click',function(){\
var b=t.tBodies[0],r=Array.prototype.slice.call(b.rows),d=h.dataset.dir==='a'?-1:1;\
r.sort(function(x,y){var p=x.cells[i],q=y.cells[i],u=p.dataset.v,v=q.dataset.v;\
if(u!==undefined&&v!==undefined){return d*(parseFloat(u)-parseFloat(v));}\
return d*p.textContent.localeCompare(q.textContent);});\
t.querySelectorAll('th').forEach(function(o){o.classList.remove('sorted');delete o.dataset.dir;});\
h.classList.add('sorted');h.dataset.dir=d===1?'a':'d';r.forEach(function(x){b.appendChild(x);});});});});\
document.body.setAttribute('data-ready','1');";

/// The whole page for `doc`.
pub fn render(doc: &Document) -> String {
    let mut o = String::with_capacity(64 * 1024);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        esc(&doc.title),
        esc(&doc.title)
    );
    section_summary(&mut o, doc);
    if let Some(t) = &doc.ranking {
        o.push_str("<section id=\"ranking\"><h2>Ranked plans</h2><p class=\"note\">Click a column to sort.</p><div class=\"scroll\">");
        table(&mut o, t);
        o.push_str("</div></section>\n");
    }
    if !doc.breakdowns.is_empty() {
        charts::breakdown(&mut o, &doc.breakdowns);
    }
    if let Some(p) = &doc.plan {
        let _ = writeln!(o, "<h2>{}</h2>", esc(&p.heading));
        charts::timeline(&mut o, p);
        charts::communication(&mut o, p);
        charts::memory(&mut o, p);
    }
    if let Some(v) = &doc.validation {
        charts::validation(&mut o, v);
    }
    let _ = write!(o, "<script>{SCRIPT}</script>\n</body></html>\n");
    o
}

fn section_summary(o: &mut String, doc: &Document) {
    o.push_str("<section id=\"summary\"><h2>Summary</h2><dl>");
    for (k, v) in &doc.summary {
        let _ = write!(o, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    o.push_str("</dl>");
    if !doc.caveats.is_empty() {
        o.push_str("<h3>Caveats</h3><ul class=\"caveats\">");
        for c in &doc.caveats {
            let _ = write!(o, "<li>{}</li>", esc(c));
        }
        o.push_str("</ul>");
    }
    o.push_str("</section>\n");
}

/// A sortable table.
pub(crate) fn table(o: &mut String, t: &Table) {
    let numeric: Vec<bool> = (0..t.columns.len())
        .map(|i| {
            t.rows
                .iter()
                .all(|r| r.get(i).is_some_and(|c| c.sort.is_some()))
                && !t.rows.is_empty()
        })
        .collect();
    o.push_str("<table class=\"sortable\"><thead><tr>");
    for (i, h) in t.columns.iter().enumerate() {
        let cls = if numeric[i] { "" } else { " class=\"t\"" };
        let _ = write!(o, "<th{cls}>{}</th>", esc(h));
    }
    o.push_str("</tr></thead><tbody>");
    for r in &t.rows {
        o.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            match c.sort {
                Some(v) if numeric.get(i).copied().unwrap_or(false) => {
                    let _ = write!(o, "<td data-v=\"{}\">{}</td>", sort_key(v), esc(&c.text));
                }
                _ => {
                    let _ = write!(o, "<td class=\"t\">{}</td>", esc(&c.text));
                }
            }
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table>");
}

/// A sort key JavaScript's `parseFloat` reads back (full precision, non-finite as 0).
fn sort_key(v: f64) -> String {
    if v.is_finite() {
        format!("{v:e}")
    } else {
        "0".into()
    }
}

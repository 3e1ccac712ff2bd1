//! The report's chart: pass rate per endpoint (models, baselines, oracle,
//! null), overall and per tag, as a grouped horizontal bar chart in plain
//! SVG text (no drawing library: a few rectangles and labels).

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Bar colours, one per endpoint (cycled past eight).
const PALETTE: &[&str] = &[
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
];

const WIDTH: f64 = 820.0;
const LABEL_W: f64 = 130.0;
const BAR_AREA: f64 = 560.0;
const BAR_H: f64 = 14.0;
const BAR_GAP: f64 = 2.0;
const ROW_GAP: f64 = 12.0;
const LEGEND_ROW: f64 = 18.0;
const TOP: f64 = 36.0;

/// Text as SVG character data or an attribute value. Endpoint labels come
/// from the operator's model files; scenario tags from scenario.conf.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 does not allow at all.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('?'),
            '\u{FFFE}' | '\u{FFFF}' => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// Passed and total runs per (category, endpoint); categories are
/// "overall" and each tag of the runs, in `tag_order`.
struct Tally {
    endpoints: Vec<String>,
    categories: Vec<String>,
    counts: BTreeMap<(String, String), (u64, u64)>,
}

fn tally(runs: &[Value], tag_order: &[&str]) -> Tally {
    let mut endpoints: Vec<String> = Vec::new();
    let mut tags_seen: Vec<String> = Vec::new();
    let mut counts: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for r in runs {
        let ep = r["model"].as_str().unwrap_or("?").to_string();
        if !endpoints.contains(&ep) {
            endpoints.push(ep.clone());
        }
        let pass = u64::from(r["pass"] == true);
        let mut cats = vec!["overall".to_string()];
        for t in r["tags"].as_array().into_iter().flatten() {
            if let Some(t) = t.as_str() {
                if !cats.iter().any(|c| c == t) {
                    cats.push(t.to_string());
                }
                if !tags_seen.iter().any(|s| s == t) {
                    tags_seen.push(t.to_string());
                }
            }
        }
        for c in cats {
            let e = counts.entry((c, ep.clone())).or_insert((0, 0));
            e.0 += pass;
            e.1 += 1;
        }
    }
    endpoints.sort();
    // Known tags in their usual order, then any other in order of appearance.
    let mut categories = vec!["overall".to_string()];
    for t in tag_order {
        if tags_seen.iter().any(|s| s == t) {
            categories.push(t.to_string());
        }
    }
    for t in tags_seen {
        if !categories.contains(&t) {
            categories.push(t);
        }
    }
    Tally {
        endpoints,
        categories,
        counts,
    }
}

/// The chart as a standalone SVG document.
pub fn render(runs: &[Value], tag_order: &[&str]) -> String {
    let t = tally(runs, tag_order);
    let n_ep = t.endpoints.len().max(1) as f64;
    let row_h = n_ep * (BAR_H + BAR_GAP) + ROW_GAP;
    let legend_h = LEGEND_ROW * t.endpoints.len() as f64;
    let chart_top = TOP + legend_h + 10.0;
    let height = chart_top + row_h * t.categories.len() as f64 + 24.0;
    let x0 = LABEL_W;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    s.push_str("<title>sysward eval: pass rate per endpoint, overall and per tag</title>\n");
    let _ = writeln!(
        s,
        r##"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">sysward eval: pass rate per endpoint</text>"#
    );
    for (i, ep) in t.endpoints.iter().enumerate() {
        let y = TOP + LEGEND_ROW * i as f64;
        let colour = PALETTE[i % PALETTE.len()];
        let _ = writeln!(
            s,
            r#"<rect x="{x0}" y="{y}" width="12" height="12" fill="{colour}"/><text x="{}" y="{}">{}</text>"#,
            x0 + 18.0,
            y + 10.5,
            esc(ep)
        );
    }
    // Grid lines at 0, 25, 50, 75 and 100 %.
    let grid_bottom = height - 20.0;
    for q in 0..=4 {
        let x = x0 + BAR_AREA * f64::from(q) / 4.0;
        let _ = writeln!(
            s,
            r##"<line x1="{x}" y1="{chart_top}" x2="{x}" y2="{grid_bottom}" stroke="#cccccc" stroke-width="1"/><text x="{x}" y="{}" text-anchor="middle" fill="#555555">{}%</text>"##,
            grid_bottom + 14.0,
            q * 25
        );
    }
    for (ci, cat) in t.categories.iter().enumerate() {
        let row_y = chart_top + row_h * ci as f64 + ROW_GAP / 2.0;
        let weight = if cat == "overall" { "bold" } else { "normal" };
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end" font-weight="{weight}">{}</text>"#,
            x0 - 8.0,
            row_y + (row_h - ROW_GAP) / 2.0 + 4.0,
            esc(cat)
        );
        for (ei, ep) in t.endpoints.iter().enumerate() {
            let y = row_y + (BAR_H + BAR_GAP) * ei as f64;
            let colour = PALETTE[ei % PALETTE.len()];
            let (passed, total) = t
                .counts
                .get(&(cat.clone(), ep.clone()))
                .copied()
                .unwrap_or((0, 0));
            if total == 0 {
                let _ = writeln!(
                    s,
                    r##"<text x="{}" y="{}" fill="#888888">no runs</text>"##,
                    x0 + 4.0,
                    y + BAR_H - 3.0
                );
                continue;
            }
            let rate = passed as f64 / total as f64;
            let w = (BAR_AREA * rate * 10.0).round() / 10.0;
            let _ = writeln!(
                s,
                r#"<rect class="bar" x="{x0}" y="{y}" width="{w}" height="{BAR_H}" fill="{colour}"><title>{}, {}: {passed}/{total}</title></rect><text x="{}" y="{}">{passed}/{total}</text>"#,
                esc(ep),
                esc(cat),
                x0 + w + 4.0,
                y + BAR_H - 3.0
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(model: &str, tags: &[&str], pass: bool) -> Value {
        json!({"model": model, "tags": tags, "pass": pass})
    }

    #[test]
    fn bars_per_endpoint_and_category_with_their_rates() {
        let runs = vec![
            run("oracle", &["repair", "users"], true),
            run("oracle", &["repair"], true),
            run("null", &["repair", "users"], false),
            run("null", &["repair"], true),
            run("a<b>&\"c'", &["users"], false),
        ];
        let svg = render(&runs, crate::scenario::TAGS);
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let bars: Vec<_> = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("bar"))
            .collect();
        // overall, repair and users for oracle and null; overall and users
        // for the third (it has no repair run: "no runs" text, no bar).
        assert_eq!(bars.len(), 3 + 3 + 2);
        let width = |title: &str| -> f64 {
            let b = bars
                .iter()
                .find(|b| b.children().any(|c| c.text() == Some(title)))
                .unwrap_or_else(|| panic!("no bar {title:?} in {svg}"));
            b.attribute("width").unwrap().parse().unwrap()
        };
        assert_eq!(width("oracle, overall: 2/2"), BAR_AREA);
        assert_eq!(width("null, repair: 1/2"), BAR_AREA / 2.0);
        assert_eq!(width("null, users: 0/1"), 0.0);
        assert_eq!(width("a<b>&\"c', users: 0/1"), 0.0);
        // Categories: overall first, then the tags in TAGS order.
        let labels: Vec<&str> = doc
            .descendants()
            .filter(|n| n.attribute("text-anchor") == Some("end"))
            .filter_map(|n| n.text())
            .collect();
        assert_eq!(labels, vec!["overall", "repair", "users"]);
        assert!(svg.contains("no runs"));
    }

    #[test]
    fn hostile_labels_stay_well_formed() {
        let runs = vec![run("x\u{1}]]><!--</svg>", &["weird&tag"], true)];
        let svg = render(&runs, crate::scenario::TAGS);
        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        assert!(doc
            .descendants()
            .any(|n| n.text() == Some("x?]]><!--</svg>")));
        assert!(doc.descendants().any(|n| n.text() == Some("weird&tag")));
    }

    #[test]
    fn no_runs_is_still_a_document() {
        let svg = render(&[], crate::scenario::TAGS);
        roxmltree::Document::parse(&svg).unwrap();
    }
}

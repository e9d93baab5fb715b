//! SVG plots: distributions as CDFs on a log axis (plotters' SVG backend,
//! no system libraries). The caller names the axis and gives values in its
//! unit: latencies in µs, a command probe's metric in its own unit.

use anyhow::{Result, anyhow};
use plotters::prelude::*;

/// One distribution to draw: a legend name and its values in the axis' unit.
pub struct Series<'a> {
    pub name: &'a str,
    pub values: &'a [f64],
}

/// The x axis of a latency plot; values are the samples' ns divided by 1000.
pub const LATENCY_US: &str = "latency (µs, log scale)";

const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Empirical CDFs of each series, x (log) as `x_desc` names it, y the
/// fraction of values. A log axis has no zero: values at or below 0 are
/// drawn at the smallest positive value.
pub fn cdf(title: &str, x_desc: &str, series: &[Series]) -> Result<String> {
    let positive = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = match positive.fold(None, |m: Option<(f64, f64)>, v| {
        Some(m.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
    }) {
        Some(range) => range,
        None => return Err(anyhow!("nothing to plot: no positive value for a log axis")),
    };
    let (x0, x1) = (lo / 1.5, (hi * 1.5).max(lo * 2.0));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 540)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("plot: {e}"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(60)
            .build_cartesian_2d((x0..x1).log_scale(), 0.0..1.0)
            .map_err(|e| anyhow!("plot: {e}"))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc("fraction of samples ≤ x")
            .draw()
            .map_err(|e| anyhow!("plot: {e}"))?;
        for (i, s) in series.iter().enumerate() {
            let mut v: Vec<f64> = s.values.iter().map(|&x| x.max(lo)).collect();
            v.sort_by(f64::total_cmp);
            let n = v.len() as f64;
            let color = COLORS[i % COLORS.len()];
            let points = v.iter().enumerate().map(|(k, &x)| (x, (k + 1) as f64 / n));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(|e| anyhow!("plot: {e}"))?
                .label(format!("{} (n={})", s.name, v.len()))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow!("plot: {e}"))?;
        root.present().map_err(|e| anyhow!("plot: {e}"))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_both_series_with_axis_labels() {
        let a: Vec<f64> = (1..=200).map(|i| f64::from(50 + i) / 10.0).collect();
        let b: Vec<f64> = (1..=200).map(|i| f64::from(10 + i) / 20.0).collect();
        let svg = cdf(
            "vm — knob — improved",
            LATENCY_US,
            &[
                Series {
                    name: "baseline",
                    values: &a,
                },
                Series {
                    name: "applied",
                    values: &b,
                },
            ],
        )
        .unwrap();
        let xml = roxmltree::Document::parse(&svg).expect("the SVG parses as XML");
        assert_eq!(xml.root_element().tag_name().name(), "svg");
        let texts: Vec<&str> = xml.descendants().filter_map(|n| n.text()).collect();
        assert!(
            texts.iter().any(|t| t.contains("vm — knob — improved")),
            "title: {texts:?}"
        );
        assert!(svg.contains("baseline (n=200)") && svg.contains("applied (n=200)"));
        assert!(svg.contains("latency (µs, log scale)"));
        assert!(svg.matches("<polyline").count() >= 2);
        assert!(cdf("empty", LATENCY_US, &[]).is_err());
        let zeros = [0.0, -1.0];
        let none_positive = [Series {
            name: "z",
            values: &zeros,
        }];
        assert!(cdf("zeros", LATENCY_US, &none_positive).is_err());
    }
}

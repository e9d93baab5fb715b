//! SVG plots: latency distributions as CDFs on a log time axis (plotters'
//! SVG backend, no system libraries).

use anyhow::{Result, anyhow};
use plotters::prelude::*;

/// One distribution to draw: a legend name and its samples (ns).
pub struct Series<'a> {
    pub name: &'a str,
    pub samples_ns: &'a [f64],
}

const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Empirical CDFs of each series, x in µs (log), y the fraction of samples.
pub fn cdf(title: &str, series: &[Series]) -> Result<String> {
    let all = series.iter().flat_map(|s| s.samples_ns.iter().copied());
    let (lo, hi) = match all.fold(None, |m: Option<(f64, f64)>, v| {
        Some(m.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
    }) {
        Some((lo, hi)) => (lo.max(1.0) / 1e3, hi.max(1.0) / 1e3),
        None => return Err(anyhow!("nothing to plot: no samples")),
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
            .x_desc("latency (µs, log scale)")
            .y_desc("fraction of samples ≤ x")
            .draw()
            .map_err(|e| anyhow!("plot: {e}"))?;
        for (i, s) in series.iter().enumerate() {
            let mut v: Vec<f64> = s.samples_ns.to_vec();
            v.sort_by(f64::total_cmp);
            let n = v.len() as f64;
            let color = COLORS[i % COLORS.len()];
            let points = v
                .iter()
                .enumerate()
                .map(|(k, &ns)| (ns.max(1.0) / 1e3, (k + 1) as f64 / n));
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
        let a: Vec<f64> = (1..=200).map(|i| f64::from(50_000 + i * 100)).collect();
        let b: Vec<f64> = (1..=200).map(|i| f64::from(10_000 + i * 50)).collect();
        let svg = cdf(
            "vm — knob — improved",
            &[
                Series {
                    name: "baseline",
                    samples_ns: &a,
                },
                Series {
                    name: "applied",
                    samples_ns: &b,
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
        assert!(cdf("empty", &[]).is_err());
    }
}

//! PNG charts: curves (reward against step, accuracy against wall time) and stacked bars (time per
//! phase). The font ships with the crate (DejaVu Sans, see assets/), so charts render the same anywhere.

use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

type Chart<'a, 'b> = ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

const FONT: &str = "cppo-sans";

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, include_bytes!("../assets/DejaVuSans.ttf"));
    });
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-9 {
        return (lo - 0.5, hi + 0.5);
    }
    let pad = (hi - lo) * 0.05;
    (lo - pad, hi + pad)
}

fn canvas<'b>(path: &'b Path) -> Result<DrawingArea<BitMapBackend<'b>, plotters::coord::Shift>> {
    register_font();
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    Ok(root)
}

fn axes<'a, 'b>(
    root: &'a DrawingArea<BitMapBackend<'b>, plotters::coord::Shift>,
    title: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<Chart<'a, 'b>> {
    ChartBuilder::on(root)
        .caption(title, (FONT, 24))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(|e| anyhow!("{e}"))
}

/// `axes` with a mesh and the axes' descriptions, as the line charts draw them.
fn labelled_axes<'a, 'b>(
    root: &'a DrawingArea<BitMapBackend<'b>, plotters::coord::Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<Chart<'a, 'b>> {
    let mut chart = axes(root, title, x, y)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    Ok(chart)
}

fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    position: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("{e}"))
}

/// One line (with markers) per series: `band_chart` with one run per group.
pub fn line_chart(path: &Path, title: &str, x_label: &str, y_label: &str, series: &[Series]) -> Result<()> {
    let groups: Vec<SeriesGroup> = series.iter().map(|s| SeriesGroup { name: s.name.clone(), runs: vec![s.points.clone()] }).collect();
    band_chart(path, title, x_label, y_label, &groups)
}

/// Several runs of one thing (one arm over seeds): drawn as each run's curve, thin, and, when there are
/// several, their mean with a shaded min-max band.
pub struct SeriesGroup {
    pub name: String,
    pub runs: Vec<Vec<(f64, f64)>>,
}

/// The mean over runs of the i-th point of each (runs of different lengths: over those that have it),
/// with the lowest and highest y there: (mean x, mean y, min y, max y).
pub fn mean_band(runs: &[Vec<(f64, f64)>]) -> Vec<(f64, f64, f64, f64)> {
    let len = runs.iter().map(Vec::len).max().unwrap_or(0);
    (0..len)
        .map(|i| {
            let at: Vec<(f64, f64)> = runs.iter().filter_map(|r| r.get(i).copied()).collect();
            let n = at.len() as f64;
            let x = at.iter().map(|p| p.0).sum::<f64>() / n;
            let y = at.iter().map(|p| p.1).sum::<f64>() / n;
            let lo = at.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
            let hi = at.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
            (x, y, lo, hi)
        })
        .collect()
}

/// One colour per group: each run as a thin line, and with several runs their mean (bold, with markers)
/// over a min-max band; with one run, that run as a line with markers.
pub fn band_chart(path: &Path, title: &str, x_label: &str, y_label: &str, groups: &[SeriesGroup]) -> Result<()> {
    let root = canvas(path)?;
    let points = || groups.iter().flat_map(|g| g.runs.iter().flatten());
    let (x0, x1) = range(points().map(|p| p.0));
    let (y0, y1) = range(points().map(|p| p.1));
    let mut chart = labelled_axes(&root, title, x_label, y_label, x0..x1, y0..y1)?;
    let finite = |p: &(f64, f64)| p.0.is_finite() && p.1.is_finite();
    for (i, g) in groups.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let runs: Vec<Vec<(f64, f64)>> = g.runs.iter().map(|r| r.iter().copied().filter(finite).collect()).collect();
        let several = runs.len() > 1;
        let band = mean_band(&runs);
        if several && !band.is_empty() {
            let mut outline: Vec<(f64, f64)> = band.iter().map(|b| (b.0, b.3)).collect();
            outline.extend(band.iter().rev().map(|b| (b.0, b.2)));
            chart.draw_series(std::iter::once(Polygon::new(outline, color.mix(0.18).filled()))).map_err(|e| anyhow!("{e}"))?;
            for r in &runs {
                chart.draw_series(LineSeries::new(r.iter().copied(), color.mix(0.45).stroke_width(1))).map_err(|e| anyhow!("{e}"))?;
            }
        }
        let main: Vec<(f64, f64)> = band.iter().map(|b| (b.0, b.1)).collect();
        let label = if several { format!("{} (mean of {})", g.name, runs.len()) } else { g.name.clone() };
        chart
            .draw_series(LineSeries::new(main.iter().copied(), color.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
        chart.draw_series(main.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(|e| anyhow!("{e}"))?;
    }
    // A lone unnamed line needs no legend.
    if groups.len() > 1 || groups.first().is_some_and(|g| !g.name.is_empty()) {
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    }
    root.present().map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    Ok(())
}

/// One bar per category, stacked from segments (same segment names for every bar).
pub fn stacked_bars(path: &Path, title: &str, y_label: &str, categories: &[String], segments: &[(String, Vec<f64>)]) -> Result<()> {
    let root = canvas(path)?;
    let totals: Vec<f64> = (0..categories.len()).map(|c| segments.iter().map(|(_, v)| v[c]).sum()).collect();
    // Headroom above the tallest bar keeps the legend clear of the bars.
    let top = totals.iter().copied().fold(0.0f64, f64::max).max(1e-9) * 1.3;
    let n = categories.len().max(1) as f64;
    let mut chart = axes(&root, title, 0.0..n, 0.0..top)?;
    let cats = categories.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(categories.len().max(1) * 2 + 1)
        .x_label_formatter(&move |x: &f64| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.26 { cats.get(i).cloned().unwrap_or_default() } else { String::new() }
        })
        .y_desc(y_label)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (s, (name, values)) in segments.iter().enumerate() {
        let color = COLORS[s % COLORS.len()];
        let bars: Vec<Rectangle<(f64, f64)>> = (0..categories.len())
            .map(|c| {
                let below: f64 = segments[..s].iter().map(|(_, v)| v[c]).sum();
                Rectangle::new([(c as f64 + 0.2, below), (c as f64 + 0.8, below + values[c])], color.filled())
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(|e| anyhow!("{e}"))?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present().map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    Ok(())
}

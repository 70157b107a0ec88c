//! Small SVG line charts of the last 15 minutes: time on the x axis (minutes ago), the value
//! on the y axis with its unit, gridlines, a legend, and a text summary for screen readers.

use leptos::prelude::*;

use crate::i18n::{t, Lang, Text};
use crate::state::HISTORY_MS;

/// The drawing's size (viewBox units; the SVG scales to its box).
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 220.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 30.0;

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its name in the legend.
    pub name: String,
    /// CSS class of its stroke (`line-a`, `line-b`).
    pub class: &'static str,
    /// Drawn dashed (a configured value, against the measured one).
    pub dashed: bool,
    /// `(Unix ms, value)`, oldest first.
    pub points: Vec<(u64, f64)>,
}

/// The smallest "nice" number (1, 2 or 5 × 10ⁿ) at or above `value`; 1 for nothing to show.
pub fn nice_ceiling(value: f64) -> f64 {
    if !value.is_finite() || value <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|step| step * magnitude)
        .find(|nice| *nice >= value - 1e-9)
        .unwrap_or(10.0 * magnitude)
}

/// A value for an axis label: whole numbers plain, thousands as `k`, small ones with a decimal.
pub fn axis_label(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{}k", trim((value / 1000.0 * 10.0).round() / 10.0))
    } else {
        trim((value * 10.0).round() / 10.0)
    }
}

fn trim(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// The polyline points of `points` in a chart ending at `now_ms` with top value `max`.
fn path(points: &[(u64, f64)], now_ms: u64, max: f64) -> String {
    let start = now_ms.saturating_sub(HISTORY_MS);
    let width = WIDTH - LEFT - RIGHT;
    let height = HEIGHT - TOP - BOTTOM;
    points
        .iter()
        .filter(|(at, _)| *at >= start)
        .map(|(at, value)| {
            let x = LEFT + (at - start) as f64 / HISTORY_MS as f64 * width;
            let y = TOP + height - value.max(0.0) / max * height;
            format!("{x:.1},{y:.1}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A line chart of the last 15 minutes ending at the newest point.
#[component]
pub fn LineChart(
    /// Heading and accessible name.
    title: Text,
    /// The y axis' unit, e.g. "people" or "/s".
    unit: Text,
    /// The lines, recomputed as figures arrive.
    series: Signal<Vec<Series>>,
    /// The language of the labels.
    lang: RwSignal<Lang>,
) -> impl IntoView {
    let now_ms = move || {
        series.with(|series| {
            series
                .iter()
                .filter_map(|line| line.points.last().map(|(at, _)| *at))
                .max()
                .unwrap_or(0)
        })
    };
    let max = move || {
        nice_ceiling(series.with(|series| {
            series
                .iter()
                .flat_map(|line| line.points.iter().map(|(_, value)| *value))
                .fold(0.0, f64::max)
        }))
    };
    let plot_height = HEIGHT - TOP - BOTTOM;
    let y_ticks = move || {
        let max = max();
        (0..=4)
            .map(|step| {
                let value = max * f64::from(step) / 4.0;
                let y = TOP + plot_height - plot_height * f64::from(step) / 4.0;
                view! {
                    <line class="grid" x1=LEFT x2=WIDTH - RIGHT y1=y y2=y />
                    <text class="tick" x=LEFT - 6.0 y=y + 4.0 text-anchor="end">{axis_label(value)}</text>
                }
            })
            .collect_view()
    };
    let x_ticks = move || {
        let lang = lang.get();
        [15u32, 10, 5, 0]
            .into_iter()
            .map(|ago| {
                let x = LEFT + (WIDTH - LEFT - RIGHT) * (1.0 - f64::from(ago) / 15.0);
                let label = if ago == 0 {
                    t(lang, Text::Now).to_owned()
                } else {
                    format!("{ago} {}", t(lang, Text::MinutesAgo))
                };
                let anchor = if ago == 15 {
                    "start"
                } else if ago == 0 {
                    "end"
                } else {
                    "middle"
                };
                view! {
                    <line class="axis" x1=x x2=x y1=HEIGHT - BOTTOM y2=HEIGHT - BOTTOM + 4.0 />
                    <text class="tick" x=x y=HEIGHT - 8.0 text-anchor=anchor>{label}</text>
                }
            })
            .collect_view()
    };
    let lines = move || {
        let (now, max) = (now_ms(), max());
        series
            .get()
            .into_iter()
            .map(|line| {
                let class = format!(
                    "line {}{}",
                    line.class,
                    if line.dashed { " dashed" } else { "" }
                );
                view! { <polyline class=class points=path(&line.points, now, max) /> }
            })
            .collect_view()
    };
    let summary = move || {
        let lang = lang.get();
        series.with(|series| {
            series
                .iter()
                .map(|line| {
                    let last = line
                        .points
                        .last()
                        .map_or("–".to_owned(), |(_, v)| axis_label(*v));
                    format!("{}: {last} {}", line.name, t(lang, unit))
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
    };
    let legend = move || {
        series
            .get()
            .into_iter()
            .map(|line| {
                let class = format!(
                    "swatch {}{}",
                    line.class,
                    if line.dashed { " dashed" } else { "" }
                );
                view! { <li><span class=class aria-hidden="true"></span>{line.name}</li> }
            })
            .collect_view()
    };
    // What is drawn, for tests and tools: the first line's points in the window and when the
    // oldest of them was read (Unix ms; empty with none).
    let drawn = move || {
        let start = now_ms().saturating_sub(HISTORY_MS);
        series.with(|series| {
            let shown: Vec<u64> = series
                .first()
                .map(|line| line.points.iter().map(|(at, _)| *at))
                .into_iter()
                .flatten()
                .filter(|at| *at >= start)
                .collect();
            (shown.len(), shown.first().copied())
        })
    };
    view! {
        <figure
            class="chart"
            data-points=move || drawn().0.to_string()
            data-first-ms=move || drawn().1.map(|at| at.to_string()).unwrap_or_default()
        >
            <figcaption>
                {move || t(lang.get(), title)} " "
                <span class="unit">"(" {move || t(lang.get(), unit)} ")"</span>
            </figcaption>
            <svg
                viewBox=format!("0 0 {WIDTH} {HEIGHT}")
                role="img"
                aria-label=move || format!("{}. {}", t(lang.get(), title), summary())
            >
                {y_ticks}
                <line class="axis" x1=LEFT x2=LEFT y1=TOP y2=HEIGHT - BOTTOM />
                <line class="axis" x1=LEFT x2=WIDTH - RIGHT y1=HEIGHT - BOTTOM y2=HEIGHT - BOTTOM />
                {x_ticks}
                {lines}
            </svg>
            <ul class="legend">{legend}</ul>
        </figure>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_tops_are_nice_numbers() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(3.0), 5.0);
        assert_eq!(nice_ceiling(175.0), 200.0);
        assert_eq!(nice_ceiling(500.0), 500.0);
        assert_eq!(nice_ceiling(501.0), 1000.0);
        assert_eq!(nice_ceiling(0.3), 0.5);
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(axis_label(0.0), "0");
        assert_eq!(axis_label(2.5), "2.5");
        assert_eq!(axis_label(1250.0), "1250");
        assert_eq!(axis_label(25_000.0), "25k");
    }

    #[test]
    fn points_map_into_the_plot() {
        let now = HISTORY_MS * 2;
        let drawn = path(&[(now - HISTORY_MS, 0.0), (now, 10.0)], now, 10.0);
        assert_eq!(
            drawn,
            format!(
                "{LEFT:.1},{:.1} {:.1},{TOP:.1}",
                HEIGHT - BOTTOM,
                WIDTH - RIGHT
            )
        );
    }
}

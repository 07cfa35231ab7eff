//! SVG pictures (plotters, SVG backend only): the precision/recall/F1 curves of `simdex tune`
//! (the paper's Figure 1) and the histogram of h of `simdex inspect --plot` (Figure 2a).
//! `style.rs` holds what both share: the colour-blind safe palette, the legend drawn beside
//! the data (never over it), the error type.

mod histogram;
mod style;
mod tune;

pub use histogram::{histogram_svg, Histogram};
pub use tune::{tune_svg, Line, Mark};

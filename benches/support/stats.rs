//! Least-squares slopes of a benchmark's samples: across a whole run, and within
//! each life of a process restarted along the way.

use std::collections::BTreeMap;

/// The least-squares slope of y on x; None with fewer than two distinct x.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// One slope shared by every life (life, x, y), each life with its own intercept: the
/// least-squares slope of the deviations from each life's own means.
pub fn slope_within(points: &[(usize, f64, f64)]) -> Option<f64> {
    fit_within(points).map(|f| f.0)
}

/// [`slope_within`] with its standard error: the residuals' spread about the fitted
/// lines over the spread of x. A slope within two standard errors of a bound cannot be
/// told from it by the run. `None` for the error with no residual degree of freedom.
#[allow(dead_code)]
pub fn fit_within(points: &[(usize, f64, f64)]) -> Option<(f64, Option<f64>)> {
    let mut lives: BTreeMap<usize, Vec<(f64, f64)>> = BTreeMap::new();
    for (l, x, y) in points {
        lives.entry(*l).or_default().push((*x, *y));
    }
    let (mut sxx, mut sxy) = (0.0, 0.0);
    for pts in lives.values() {
        let n = pts.len() as f64;
        let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
        let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
        sxx += pts.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
        sxy += pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>();
    }
    if sxx <= 0.0 {
        return None;
    }
    let b = sxy / sxx;
    let mut rss = 0.0;
    for pts in lives.values() {
        let n = pts.len() as f64;
        let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
        let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
        rss += pts
            .iter()
            .map(|p| ((p.1 - my) - b * (p.0 - mx)).powi(2))
            .sum::<f64>();
    }
    // One degree of freedom per life's intercept, one for the slope.
    let dof = points.len() as f64 - lives.len() as f64 - 1.0;
    let se = (dof > 0.0).then(|| (rss / dof / sxx).sqrt());
    Some((b, se))
}

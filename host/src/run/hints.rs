//! What a manifest says about how hard its API may be driven (`concurrency_level`,
//! `api_budget`): run policy, read here so the host can lower its own settings to it.

use serde_json::Value;

/// What a manifest says about how hard its API may be driven: `concurrency_level` and
/// `api_budget`. The host only ever lowers its own settings to these, never raises them.
#[derive(Debug, Default, PartialEq)]
pub struct RunHints {
    /// Partitions at once (`concurrency_level.max_concurrency`, else `default_concurrency`).
    pub concurrency: Option<usize>,
    /// Requests per second (the strictest of `api_budget`'s policies, whatever they match).
    pub rate_per_sec: Option<f64>,
    /// What was written but could not be read (a template the host does not evaluate).
    pub unread: Vec<String>,
}

impl RunHints {
    pub fn of(manifest: &Value, config: &Value) -> RunHints {
        let mut hints = RunHints::default();
        if let Some(level) = manifest.get("concurrency_level") {
            let field = if level.get("max_concurrency").is_some() { "max_concurrency" } else { "default_concurrency" };
            match number(level.get(field), config) {
                Some(n) if n >= 1.0 => hints.concurrency = Some(n as usize),
                _ => hints.unread.push(format!("concurrency_level.{field}")),
            }
        }
        let policies = manifest.get("api_budget").and_then(|b| b.get("policies")).and_then(Value::as_array);
        for (i, policy) in policies.into_iter().flatten().enumerate() {
            let rates: Vec<(Option<f64>, Option<f64>)> = match policy.get("type").and_then(Value::as_str) {
                Some("FixedWindowCallRatePolicy") => {
                    vec![(number(policy.get("call_limit"), config), seconds(policy.get("period")))]
                }
                Some("MovingWindowCallRatePolicy") => policy
                    .get("rates")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|r| (number(r.get("limit"), config), seconds(r.get("interval"))))
                    .collect(),
                _ => Vec::new(),
            };
            for rate in rates {
                match rate {
                    (Some(limit), Some(secs)) if limit > 0.0 && secs > 0.0 => {
                        let per_sec = limit / secs;
                        hints.rate_per_sec = Some(hints.rate_per_sec.map_or(per_sec, |r: f64| r.min(per_sec)));
                    }
                    _ => hints.unread.push(format!("api_budget.policies[{i}]")),
                }
            }
        }
        hints
    }
}

/// A number as written, or a `{{ config['k'] }}` / `{{ config.get('k', N) }}` template read
/// against the config (the engine evaluates every other template; these settings are the
/// host's).
fn number(value: Option<&Value>, config: &Value) -> Option<f64> {
    match value? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let inner = s.trim().strip_prefix("{{")?.strip_suffix("}}")?.trim();
            if let Ok(n) = inner.parse::<f64>() {
                return Some(n);
            }
            let (key, default) = if let Some(rest) = inner.strip_prefix("config.get(").and_then(|r| r.strip_suffix(')'))
            {
                let mut parts = rest.splitn(2, ',');
                let key = parts.next()?.trim().trim_matches(['\'', '"']).to_string();
                (key, parts.next().and_then(|d| d.trim().parse::<f64>().ok()))
            } else {
                let key =
                    inner.strip_prefix("config[")?.strip_suffix(']')?.trim().trim_matches(['\'', '"']).to_string();
                (key, None)
            };
            match config.get(&key) {
                Some(Value::Number(n)) => n.as_f64(),
                Some(Value::String(s)) => s.parse().ok(),
                _ => default,
            }
        }
        _ => None,
    }
}

/// An ISO 8601 duration of days, hours, minutes and seconds, in seconds.
fn seconds(value: Option<&Value>) -> Option<f64> {
    let text = value?.as_str()?.strip_prefix('P')?;
    let (days, time) = match text.split_once('T') {
        Some((d, t)) => (d, t),
        None => (text, ""),
    };
    let mut total = 0.0;
    let mut take = |part: &str, units: &[(char, f64)]| -> Option<()> {
        let mut number = String::new();
        for c in part.chars() {
            match units.iter().find(|(u, _)| *u == c) {
                Some((_, factor)) => {
                    total += number.parse::<f64>().ok()? * factor;
                    number.clear();
                }
                None => number.push(c),
            }
        }
        number.is_empty().then_some(())
    };
    take(days, &[('W', 604_800.0), ('D', 86_400.0)])?;
    take(time, &[('H', 3600.0), ('M', 60.0), ('S', 1.0)])?;
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_hints_read_literals_and_config_templates() {
        let manifest = serde_json::json!({
            "concurrency_level": {"type": "ConcurrencyLevel", "default_concurrency": "{{ config.get('num_workers', 3) }}", "max_concurrency": 20},
            "api_budget": {"type": "HTTPAPIBudget", "policies": [
                {"type": "FixedWindowCallRatePolicy", "period": "PT1M", "call_limit": 120, "matchers": []},
                {"type": "MovingWindowCallRatePolicy", "rates": [{"limit": "{{ config['rps'] }}", "interval": "PT1S"}], "matchers": []}
            ]}
        });
        let hints = RunHints::of(&manifest, &serde_json::json!({"rps": 5}));
        assert_eq!(hints, RunHints { concurrency: Some(20), rate_per_sec: Some(2.0), unread: vec![] });
        let manifest =
            serde_json::json!({"concurrency_level": {"default_concurrency": "{{ config.get('num_workers', 3) }}"}});
        assert_eq!(RunHints::of(&manifest, &serde_json::json!({})).concurrency, Some(3));
        assert_eq!(RunHints::of(&manifest, &serde_json::json!({"num_workers": 7})).concurrency, Some(7));
        let manifest = serde_json::json!({"concurrency_level": {"default_concurrency": "{{ 2 * 3 }}"}});
        assert_eq!(RunHints::of(&manifest, &serde_json::json!({})).unread, ["concurrency_level.default_concurrency"]);
        assert_eq!(seconds(Some(&serde_json::json!("P1DT1H30S"))), Some(90_030.0));
    }
}

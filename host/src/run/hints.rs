//! What a manifest says about how hard its API may be driven (`concurrency_level`,
//! `api_budget`): run policy, read here so the host can lower its own settings to it.

use crate::net::budget::{FromResponses, Limit, Matcher, Policy};
use serde_json::Value;
use std::time::Duration;

/// The most policies, rates per policy and matchers per policy read from a manifest.
const MAX_POLICIES: usize = 64;

/// What a manifest says about how hard its API may be driven: `concurrency_level` and
/// `api_budget`. The host only ever lowers its own settings to these, never raises them.
#[derive(Debug, Default)]
pub struct RunHints {
    /// Partitions at once (`concurrency_level.max_concurrency`, else `default_concurrency`).
    pub concurrency: Option<usize>,
    /// `api_budget`'s policies, as the CDK's `HTTPAPIBudget` applies them (none: no budget).
    pub budget: Vec<Policy>,
    /// Which answers update the budget (its `ratelimit_*_header` and status codes).
    pub budget_responses: FromResponses,
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
        let budget = manifest.get("api_budget");
        let header = |field: &str| budget.and_then(|b| b.get(field)).and_then(Value::as_str).map(str::to_lowercase);
        let defaults = FromResponses::default();
        hints.budget_responses = FromResponses {
            reset_header: header("ratelimit_reset_header").unwrap_or(defaults.reset_header),
            remaining_header: header("ratelimit_remaining_header").unwrap_or(defaults.remaining_header),
            statuses_for_limit_hit: match budget.and_then(|b| b.get("status_codes_for_ratelimit_hit")) {
                Some(Value::Array(codes)) => {
                    codes.iter().filter_map(Value::as_u64).filter_map(|c| u16::try_from(c).ok()).collect()
                }
                _ => defaults.statuses_for_limit_hit,
            },
        };
        let policies = budget.and_then(|b| b.get("policies")).and_then(Value::as_array);
        for (i, policy) in policies.into_iter().flatten().enumerate().take(MAX_POLICIES) {
            match read_policy(policy, config) {
                Some(policy) => hints.budget.push(policy),
                None => hints.unread.push(format!("api_budget.policies[{i}]")),
            }
        }
        hints
    }
}

/// One policy of an `api_budget`; None when a number, a duration or a pattern cannot be read.
fn read_policy(policy: &Value, config: &Value) -> Option<Policy> {
    let rate = |limit: Option<&Value>, interval: Option<&Value>| -> Option<(u32, Duration)> {
        let limit = number(limit, config).filter(|l| *l >= 1.0)?;
        let interval = Duration::try_from_secs_f64(seconds(interval)?).ok().filter(|d| !d.is_zero())?;
        Some((limit.min(u32::MAX as f64) as u32, interval))
    };
    let limit = match policy.get("type").and_then(Value::as_str)? {
        "UnlimitedCallRatePolicy" => Limit::Unlimited,
        "FixedWindowCallRatePolicy" => {
            let (limit, period) = rate(policy.get("call_limit"), policy.get("period"))?;
            Limit::Fixed { limit, period }
        }
        "MovingWindowCallRatePolicy" => {
            let rates = policy.get("rates")?.as_array()?;
            let rates: Option<Vec<_>> =
                rates.iter().take(MAX_POLICIES).map(|r| rate(r.get("limit"), r.get("interval"))).collect();
            Limit::MovingWindow(rates.filter(|r| !r.is_empty())?)
        }
        _ => return None,
    };
    let matchers = match policy.get("matchers") {
        None | Some(Value::Null) => Vec::new(),
        Some(list) => list.as_array()?.iter().take(MAX_POLICIES).map(read_matcher).collect::<Option<Vec<_>>>()?,
    };
    Some(Policy { limit, matchers })
}

/// An `HttpRequestRegexMatcher`; its pattern compiled with a size limit (the manifest is
/// untrusted; the regex crate matches in linear time).
fn read_matcher(m: &Value) -> Option<Matcher> {
    let text = |field: &str| m.get(field).and_then(Value::as_str).map(str::to_string);
    let pairs = |field: &str| -> Option<Vec<(String, String)>> {
        match m.get(field) {
            None | Some(Value::Null) => Some(Vec::new()),
            Some(Value::Object(map)) => Some(
                map.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
                    .collect(),
            ),
            Some(_) => None,
        }
    };
    let pattern = match text("url_path_pattern").filter(|p| !p.is_empty()) {
        Some(p) => Some(regex::RegexBuilder::new(&p).size_limit(1 << 20).build().ok()?),
        None => None,
    };
    Some(Matcher {
        method: text("method").filter(|t| !t.is_empty()).map(|t| t.to_uppercase()),
        url_base: text("url_base").filter(|t| !t.is_empty()).map(|t| t.trim_end_matches('/').to_string()),
        url_path_pattern: pattern,
        params: pairs("params")?,
        headers: pairs("headers")?,
        weight: m.get("weight").and_then(Value::as_u64).map(|w| w.clamp(1, u32::MAX as u64) as u32),
    })
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
        assert_eq!(hints.concurrency, Some(20));
        assert!(hints.unread.is_empty(), "{:?}", hints.unread);
        assert!(
            matches!(hints.budget[0].limit, Limit::Fixed { limit: 120, period } if period == Duration::from_secs(60))
        );
        assert!(matches!(&hints.budget[1].limit, Limit::MovingWindow(r) if r == &[(5, Duration::from_secs(1))]));
        let manifest = serde_json::json!({"api_budget": {"policies": [
            {"type": "MovingWindowCallRatePolicy", "rates": [{"limit": 3, "interval": "PT1S"}],
             "matchers": [{"method": "get", "url_path_pattern": "^/api/flows($|/)", "params": {"a": 1}, "weight": 2}]},
            {"type": "MovingWindowCallRatePolicy", "rates": [{"limit": 3, "interval": "PT1S"}], "matchers": [{"url_path_pattern": "(unclosed"}]},
            {"type": "UnlimitedCallRatePolicy", "matchers": []}
        ]}});
        let hints = RunHints::of(&manifest, &serde_json::json!({}));
        assert_eq!(hints.unread, ["api_budget.policies[1]"]);
        let flows = &hints.budget[0].matchers[0];
        assert_eq!(
            (flows.method.as_deref(), flows.weight, &flows.params[..]),
            (Some("GET"), Some(2), &[("a".to_string(), "1".to_string())][..])
        );
        assert!(matches!(hints.budget[1].limit, Limit::Unlimited));
        assert_eq!(hints.budget_responses.remaining_header, "ratelimit-remaining", "the CDK's default");
        let manifest = serde_json::json!({"api_budget": {"ratelimit_remaining_header": "X-RateLimit-Remaining",
            "status_codes_for_ratelimit_hit": [429, 503], "policies": []}});
        let hints = RunHints::of(&manifest, &serde_json::json!({}));
        assert_eq!(hints.budget_responses.remaining_header, "x-ratelimit-remaining");
        assert_eq!(hints.budget_responses.statuses_for_limit_hit, [429, 503]);
        let manifest =
            serde_json::json!({"concurrency_level": {"default_concurrency": "{{ config.get('num_workers', 3) }}"}});
        assert_eq!(RunHints::of(&manifest, &serde_json::json!({})).concurrency, Some(3));
        assert_eq!(RunHints::of(&manifest, &serde_json::json!({"num_workers": 7})).concurrency, Some(7));
        let manifest = serde_json::json!({"concurrency_level": {"default_concurrency": "{{ 2 * 3 }}"}});
        assert_eq!(RunHints::of(&manifest, &serde_json::json!({})).unread, ["concurrency_level.default_concurrency"]);
        assert_eq!(seconds(Some(&serde_json::json!("P1DT1H30S"))), Some(90_030.0));
    }
}

//! A call budget, as the Airbyte CDK's `HTTPAPIBudget` keeps one for a whole sync: policies tried
//! in order, the first whose matchers take a request governing it (a request none takes goes
//! at once). A moving window allows `limit` calls in any `interval` (bursts up to the limit, then
//! a wait until the oldest call leaves the window); a fixed window allows `limit` calls per
//! period counted from the budget's start; an unlimited policy exempts what it matches. A wait
//! slows the request being made, never another one. Answers update the policy that governed
//! their request, as the CDK's `HttpAPIBudget.update_from_response` does: the calls left
//! (`ratelimit-remaining`, or none on a 429) and, for a fixed window, when it resets
//! (`ratelimit-reset`, an epoch timestamp).

use crate::net::hooks::{Attempt, BoxFuture, HttpHooks, Outcome, Timing};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// The longest wait a policy can ask for before one request.
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// Which requests a policy governs: every field given must match (`HttpRequestRegexMatcher`).
#[derive(Debug, Default)]
pub struct Matcher {
    /// Upper case.
    pub method: Option<String>,
    /// `scheme://host[:port]`, without a trailing slash.
    pub url_base: Option<String>,
    /// Searched for in the path (its trailing slash dropped).
    pub url_path_pattern: Option<regex::Regex>,
    /// Query parameters the request has, with these values.
    pub params: Vec<(String, String)>,
    /// Headers the request has (names in any case), with these values.
    pub headers: Vec<(String, String)>,
    /// What a request it matches costs (1 when not given).
    pub weight: Option<u32>,
}

impl Matcher {
    fn matches(&self, attempt: &Attempt<'_>) -> bool {
        let url = attempt.url;
        // `scheme://host[:port]`, compared without building it (every request asks).
        let base_is = |b: &str| {
            b.strip_prefix(url.scheme()).and_then(|rest| rest.strip_prefix("://"))
                == Some(&url[url::Position::BeforeHost..url::Position::AfterPort])
        };
        self.method.as_deref().is_none_or(|m| m == attempt.method)
            && self.url_base.as_deref().is_none_or(base_is)
            && self.url_path_pattern.as_ref().is_none_or(|p| p.is_match(url.path().trim_end_matches('/')))
            && self.params.iter().all(|(k, v)| url.query_pairs().any(|(qk, qv)| qk == *k && qv == *v))
            && self
                .headers
                .iter()
                .all(|(k, v)| attempt.request.headers.iter().any(|(hk, hv)| hk.eq_ignore_ascii_case(k) && hv == v))
    }
}

/// How a policy counts calls.
#[derive(Debug)]
pub enum Limit {
    Unlimited,
    /// `(limit, interval)` pairs, all of which hold.
    MovingWindow(Vec<(u32, Duration)>),
    Fixed {
        limit: u32,
        period: Duration,
    },
}

#[derive(Debug)]
pub struct Policy {
    pub limit: Limit,
    /// None: every request.
    pub matchers: Vec<Matcher>,
}

/// What a policy has counted.
#[derive(Debug)]
enum Counted {
    None,
    /// The times of the calls still in the longest window, oldest first.
    Calls(VecDeque<Instant>),
    /// The current window's end, and the calls it has left.
    Window {
        ends: Instant,
        left: u32,
    },
}

/// Which answers tell the budget how many calls are left (`HttpAPIBudget`'s settings).
#[derive(Debug, Clone)]
pub struct FromResponses {
    /// Header names, lower case.
    pub reset_header: String,
    pub remaining_header: String,
    /// Statuses that mean no calls are left.
    pub statuses_for_limit_hit: Vec<u16>,
}

impl Default for FromResponses {
    fn default() -> Self {
        FromResponses {
            reset_header: "ratelimit-reset".into(),
            remaining_header: "ratelimit-remaining".into(),
            statuses_for_limit_hit: vec![429],
        }
    }
}

/// A run's call budget, shared by all its partitions.
#[derive(Debug)]
pub struct CallBudget {
    policies: Vec<(Policy, Mutex<Counted>)>,
    from_responses: FromResponses,
}

impl CallBudget {
    pub fn new(policies: Vec<Policy>) -> CallBudget {
        Self::with_responses(policies, FromResponses::default())
    }

    pub fn with_responses(policies: Vec<Policy>, from_responses: FromResponses) -> CallBudget {
        let now = Instant::now();
        let counted = |limit: &Limit| match limit {
            Limit::Unlimited => Counted::None,
            Limit::MovingWindow(_) => Counted::Calls(VecDeque::new()),
            Limit::Fixed { limit, period } => Counted::Window { ends: now + *period, left: *limit },
        };
        CallBudget {
            from_responses,
            policies: policies
                .into_iter()
                .map(|p| {
                    let c = Mutex::new(counted(&p.limit));
                    (p, c)
                })
                .collect(),
        }
    }

    /// The policy governing this request, if any, and what the request costs under it (the
    /// weight of the matcher that took it; 1 when none says, or the policy matches everything).
    fn governing(&self, attempt: &Attempt<'_>) -> Option<(&Policy, &Mutex<Counted>, u32)> {
        self.policies.iter().find_map(|(p, counted)| {
            if p.matchers.is_empty() {
                return Some((p, counted, 1));
            }
            let matcher = p.matchers.iter().find(|m| m.matches(attempt))?;
            Some((p, counted, matcher.weight.unwrap_or(1)))
        })
    }

    /// What an answer says of the calls left, to the policy that governed its request.
    pub fn update(&self, attempt: &Attempt<'_>, status: u16, headers: &[(String, String)]) {
        let Some((policy, counted, _)) = self.governing(attempt) else { return };
        let header = |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim());
        let remaining = match header(&self.from_responses.remaining_header) {
            Some(v) => v.parse::<u64>().ok(),
            None => self.from_responses.statuses_for_limit_hit.contains(&status).then_some(0),
        };
        let reset = header(&self.from_responses.reset_header).and_then(|v| v.parse::<u64>().ok());
        let mut counted = counted.lock().unwrap_or_else(|e| e.into_inner());
        adjust(&policy.limit, &mut counted, remaining, reset, Instant::now(), std::time::SystemTime::now());
    }

    /// Waits until the policy governing this request has a call for it, and takes it.
    pub async fn acquire(&self, attempt: &Attempt<'_>) {
        let Some((policy, counted, weight)) = self.governing(attempt) else { return };
        loop {
            let wait = {
                let mut counted = counted.lock().unwrap_or_else(|e| e.into_inner());
                take(&policy.limit, &mut counted, weight, Instant::now())
            };
            match wait {
                None => return,
                Some(wait) => tokio::time::sleep(wait.min(MAX_WAIT)).await,
            }
        }
    }
}

/// Takes `weight` calls if the policy has them now (None), else how long until it may.
fn take(limit: &Limit, counted: &mut Counted, weight: u32, now: Instant) -> Option<Duration> {
    match (limit, counted) {
        (Limit::MovingWindow(rates), Counted::Calls(calls)) => {
            let longest = rates.iter().map(|(_, interval)| *interval).max().unwrap_or_default();
            while calls.front().is_some_and(|t| now.duration_since(*t) >= longest) {
                calls.pop_front();
            }
            // A weight above the smallest limit could never be taken (the CDK refuses it): the limit.
            let weight = weight.min(rates.iter().map(|(l, _)| *l).min().unwrap_or(1)).max(1);
            let mut wait = Duration::ZERO;
            for (limit, interval) in rates {
                let in_window = calls.iter().rev().take_while(|t| now.duration_since(**t) < *interval).count();
                // At most `in_window`, as the weight is at most the limit.
                let over = (in_window + weight as usize).saturating_sub(*limit as usize);
                if over > 0 {
                    // The call that must leave the window first: the `over`-th oldest in it.
                    let oldest = calls[calls.len() - in_window + over - 1];
                    wait = wait.max((oldest + *interval).saturating_duration_since(now).max(Duration::from_millis(1)));
                }
            }
            if wait > Duration::ZERO {
                return Some(wait);
            }
            calls.extend(std::iter::repeat_n(now, weight as usize));
            // Never more than the largest limit matters.
            let keep = rates.iter().map(|(l, _)| *l as usize).max().unwrap_or(0);
            while calls.len() > keep {
                calls.pop_front();
            }
            None
        }
        (Limit::Fixed { limit, period }, Counted::Window { ends, left }) => {
            if now >= *ends {
                let periods = now.duration_since(*ends).as_nanos() / period.as_nanos().max(1) + 1;
                *ends += period.saturating_mul(u32::try_from(periods).unwrap_or(u32::MAX));
                *left = *limit;
            }
            let weight = weight.min(*limit).max(1);
            if *left >= weight {
                *left -= weight;
                return None;
            }
            Some(ends.saturating_duration_since(now).max(Duration::from_millis(1)))
        }
        _ => None,
    }
}

/// A policy told how many calls are left (`remaining`) and when a fixed window resets (`reset`,
/// epoch seconds), as the CDK's policies' `update` takes them: a fixed window has that many
/// left and ends then; a moving window takes calls from its smallest rate until it has no
/// more left than that (it never gives calls back).
fn adjust(
    limit: &Limit,
    counted: &mut Counted,
    remaining: Option<u64>,
    reset: Option<u64>,
    now: Instant,
    wall: std::time::SystemTime,
) {
    match (limit, counted) {
        (Limit::Fixed { limit, .. }, Counted::Window { ends, left }) => {
            if let Some(reset) = reset {
                let at = std::time::UNIX_EPOCH + Duration::from_secs(reset);
                *ends = now + at.duration_since(wall).unwrap_or_default().min(MAX_WAIT);
            }
            if let Some(remaining) = remaining {
                *left = u32::try_from(remaining).unwrap_or(u32::MAX).min(*limit);
            }
        }
        (Limit::MovingWindow(rates), Counted::Calls(calls)) => {
            let (Some(remaining), Some((lowest, interval))) = (remaining, rates.iter().min_by_key(|(l, _)| *l)) else {
                return;
            };
            let in_window = calls.iter().rev().take_while(|t| now.duration_since(**t) < *interval).count() as u64;
            let taken = u64::from(*lowest).saturating_sub(in_window).saturating_sub(remaining);
            calls.extend(std::iter::repeat_n(now, taken as usize));
        }
        _ => {}
    }
}

impl HttpHooks for CallBudget {
    fn before_send<'a>(&'a self, attempt: &'a Attempt<'a>) -> BoxFuture<'a> {
        Box::pin(self.acquire(attempt))
    }

    fn observe<'a>(&'a self, attempt: &'a Attempt<'a>, outcome: Outcome<'a>, _timing: Timing) -> BoxFuture<'a> {
        if let Outcome::Response(response) = outcome {
            self.update(attempt, response.status, &response.headers);
        }
        Box::pin(async {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::Request;

    fn get(url: &str) -> (url::Url, Request) {
        let request =
            Request { method: "GET".into(), url: url.into(), headers: vec![("X-Team".into(), "a".into())], body: None };
        (url::Url::parse(url).unwrap(), request)
    }

    /// A moving window lets a burst up to its limit through at once, then makes the next call
    /// wait for the oldest to leave; every rate holds.
    #[test]
    fn a_moving_window_allows_bursts_then_waits() {
        let limit = Limit::MovingWindow(vec![(3, Duration::from_secs(1)), (5, Duration::from_secs(60))]);
        let mut counted = Counted::Calls(VecDeque::new());
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        for ms in [0, 10, 20] {
            assert_eq!(take(&limit, &mut counted, 1, at(ms)), None, "a burst up to the limit waits for nothing");
        }
        assert_eq!(
            take(&limit, &mut counted, 1, at(30)),
            Some(Duration::from_millis(970)),
            "until the first leaves the second"
        );
        assert_eq!(take(&limit, &mut counted, 1, at(1000)), None);
        assert_eq!(take(&limit, &mut counted, 1, at(1010)), None);
        // Five a minute: the sixth waits for the first call to leave the minute.
        assert_eq!(take(&limit, &mut counted, 1, at(2000)), Some(Duration::from_millis(58_000)));
        assert_eq!(take(&limit, &mut counted, 1, at(60_000)), None);
        // A weight counts as that many calls; one above the smallest limit as the limit.
        let mut fresh = Counted::Calls(VecDeque::new());
        assert_eq!(take(&limit, &mut fresh, 2, at(0)), None);
        assert!(take(&limit, &mut fresh, 2, at(1)).is_some());
        assert_eq!(take(&limit, &mut Counted::Calls(VecDeque::new()), 99, at(0)), None);
    }

    /// Answers update the policy: a 429 or `ratelimit-remaining: 0` leaves no calls, and a fixed
    /// window's `ratelimit-reset` moves its end.
    #[test]
    fn answers_say_how_many_calls_are_left() {
        let t0 = Instant::now();
        let wall = std::time::SystemTime::now();
        let epoch = wall.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let fixed = Limit::Fixed { limit: 10, period: Duration::from_secs(60) };
        let mut counted = Counted::Window { ends: t0 + Duration::from_secs(60), left: 10 };
        adjust(&fixed, &mut counted, Some(0), Some(epoch + 5), t0, wall);
        assert!(matches!(counted, Counted::Window { left: 0, .. }));
        let wait = take(&fixed, &mut counted, 1, t0).unwrap();
        assert!(wait <= Duration::from_secs(5) && wait >= Duration::from_secs(4), "{wait:?}");
        let moving = Limit::MovingWindow(vec![(5, Duration::from_secs(1))]);
        let mut counted = Counted::Calls(VecDeque::new());
        assert_eq!(take(&moving, &mut counted, 1, t0), None);
        adjust(&moving, &mut counted, Some(1), None, t0, wall);
        assert_eq!(take(&moving, &mut counted, 1, t0), None, "one call left");
        assert!(take(&moving, &mut counted, 1, t0).is_some(), "then none");
    }

    #[test]
    fn a_fixed_window_refills_each_period() {
        let limit = Limit::Fixed { limit: 2, period: Duration::from_secs(10) };
        let t0 = Instant::now();
        let mut counted = Counted::Window { ends: t0 + Duration::from_secs(10), left: 2 };
        assert_eq!(take(&limit, &mut counted, 1, t0), None);
        assert_eq!(take(&limit, &mut counted, 1, t0), None);
        assert_eq!(take(&limit, &mut counted, 1, t0 + Duration::from_secs(4)), Some(Duration::from_secs(6)));
        assert_eq!(take(&limit, &mut counted, 1, t0 + Duration::from_secs(25)), None, "a later window, full again");
        assert!(matches!(counted, Counted::Window { ends, left: 1 } if ends == t0 + Duration::from_secs(30)));
    }

    /// The first policy whose matchers take a request governs it; one none takes goes at once.
    #[tokio::test]
    async fn the_first_matching_policy_governs() {
        let flows = Matcher {
            method: Some("GET".into()),
            url_base: Some("http://127.0.0.1:1".into()),
            url_path_pattern: Some(regex::Regex::new("^/api/flows($|/)").unwrap()),
            params: vec![("page".into(), "2".into())],
            headers: vec![("x-team".into(), "a".into())],
            weight: None,
        };
        let budget = CallBudget::new(vec![
            Policy { limit: Limit::Fixed { limit: 1, period: Duration::from_secs(3600) }, matchers: vec![flows] },
            Policy { limit: Limit::Unlimited, matchers: vec![] },
        ]);
        let (url, request) = get("http://127.0.0.1:1/api/flows/?page=2");
        let attempt = Attempt { context: "{}", number: 1, method: "GET", url: &url, request: &request };
        let (first, second) = (&budget.policies[0], &budget.policies[1]);
        assert!(first.0.matchers[0].matches(&attempt));
        budget.acquire(&attempt).await;
        assert!(matches!(*first.1.lock().unwrap(), Counted::Window { left: 0, .. }), "the flows policy counted it");
        for other in [
            "http://127.0.0.1:1/api/flows?page=3",
            "http://127.0.0.1:2/api/flows?page=2",
            "http://127.0.0.1:1/api/flowsx?page=2",
        ] {
            let (url, request) = get(other);
            let attempt = Attempt { context: "{}", number: 1, method: "GET", url: &url, request: &request };
            assert!(!first.0.matchers[0].matches(&attempt), "{other}");
            // The unlimited policy takes it: no wait although the first has no calls left.
            budget.acquire(&attempt).await;
        }
        assert!(matches!(*second.1.lock().unwrap(), Counted::None));
    }
}

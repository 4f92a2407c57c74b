//! `fixture-api ROUTES.json`: serves canned answers (see `sluice_tests::fixture_api`) on
//! 127.0.0.1 until killed, logging each request and the route that answered it; for trying a
//! real connector's manifest by hand against the routes a test gives it.

use anyhow::Context;
use sluice_tests::fixture_api::{FixtureApi, Route};

fn main() -> anyhow::Result<()> {
    let path =
        std::env::args().nth(1).context("usage: fixture-api ROUTES.json (a list of routes, or {\"routes\": [...]})")?;
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    let value: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{path} is not JSON"))?;
    let routes = value.get("routes").cloned().unwrap_or(value);
    let routes: Vec<Route> = serde_json::from_value(routes).with_context(|| format!("{path}: not a list of routes"))?;
    let api = FixtureApi::start(routes)?;
    println!("listening on {}", api.addr());
    let mut seen = 0;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let log = api.log();
        for line in &log[seen..] {
            eprintln!("{line}");
        }
        seen = log.len();
    }
}

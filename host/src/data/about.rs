//! What a connector is and takes, as a Singer tap says it with `--about` (Meltano reads it to
//! list a plugin's settings): its name, the tap capabilities the host gives every connector,
//! and its settings from the spec.

use serde_json::{Value, json};

/// The Singer capabilities of every connector run by the host.
pub const CAPABILITIES: [&str; 5] = ["catalog", "discover", "state", "properties", "about"];

/// `--about --format json`: the Singer SDK's shape.
pub fn json(name: &str, spec: &Value) -> Value {
    json!({
        "name": name,
        "description": spec.get("title").or(spec.get("description")).cloned().unwrap_or(Value::Null),
        "version": env!("CARGO_PKG_VERSION"),
        "sdk_version": concat!("sluice ", env!("CARGO_PKG_VERSION")),
        "capabilities": CAPABILITIES,
        "settings": spec,
    })
}

/// `--about --format markdown`: a heading, the capabilities and a table of the settings.
pub fn markdown(name: &str, spec: &Value) -> String {
    let required: Vec<&str> =
        spec.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut text = format!("# `{name}`\n\n");
    if let Some(title) = spec.get("title").and_then(Value::as_str) {
        text.push_str(&format!("{title}\n\n"));
    }
    text.push_str(&format!("Built with sluice {}.\n\n## Capabilities\n\n", env!("CARGO_PKG_VERSION")));
    for capability in CAPABILITIES {
        text.push_str(&format!("* `{capability}`\n"));
    }
    text.push_str("\n## Settings\n\n| Setting | Required | Default | Description |\n|:--------|:--------:|:-------:|:------------|\n");
    let cell = |v: Option<&Value>| {
        let text = match v {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        text.replace('|', "\\|").replace('\n', " ")
    };
    for (setting, schema) in spec.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let secret = schema.get("airbyte_secret").and_then(Value::as_bool) == Some(true);
        let description = format!("{}{}", cell(schema.get("description")), if secret { " (secret)" } else { "" });
        text.push_str(&format!(
            "| {setting} | {} | {} | {} |\n",
            if required.contains(&setting.as_str()) { "True" } else { "False" },
            cell(schema.get("default")),
            description.trim()
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_from_the_spec() {
        let spec = json!({"title": "Demo", "required": ["base_url"], "properties": {
            "base_url": {"type": "string", "description": "Where | it is"},
            "api_key": {"type": "string", "airbyte_secret": true},
            "page_size": {"type": "integer", "default": 100}}});
        let about = json("tap-demo", &spec);
        assert_eq!(about["name"], "tap-demo");
        assert_eq!(about["settings"], spec);
        assert!(about["capabilities"].as_array().unwrap().contains(&json!("state")));
        let text = markdown("tap-demo", &spec);
        assert!(text.contains("| base_url | True |  | Where \\| it is |"), "{text}");
        assert!(text.contains("| page_size | False | 100 |"), "{text}");
        assert!(text.contains("| api_key | False |  | (secret) |"), "{text}");
    }
}

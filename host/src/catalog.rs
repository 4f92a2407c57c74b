//! Which streams to read and how: an Airbyte configured catalog for `read`, or stream names for
//! `run`. Unknown keys are ignored, as platforms add their own.

use anyhow::{Context, Result, bail};
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    FullRefresh,
    Incremental,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ConfiguredCatalog {
    pub streams: Vec<ConfiguredStream>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ConfiguredStream {
    pub stream: StreamRef,
    pub sync_mode: SyncMode,
    #[serde(default)]
    pub cursor_field: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct StreamRef {
    pub name: String,
}

impl ConfiguredCatalog {
    pub fn parse(text: &str) -> Result<Self> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let catalog: ConfiguredCatalog =
            serde_path_to_error::deserialize(de).map_err(|e| anyhow::anyhow!("at {}: {}", e.path(), e.inner()))?;
        if catalog.streams.is_empty() {
            bail!("the catalog selects no streams");
        }
        Ok(catalog)
    }

    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read catalog {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("invalid catalog {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_ignores_extras() {
        let c = ConfiguredCatalog::parse(
            r#"{"streams":[{"stream":{"name":"items","json_schema":{},"supported_sync_modes":["full_refresh"]},
                "sync_mode":"incremental","destination_sync_mode":"append","cursor_field":["updated_at"],"extra":1}]}"#,
        )
        .unwrap();
        assert_eq!(c.streams[0].stream.name, "items");
        assert_eq!(c.streams[0].sync_mode, SyncMode::Incremental);
    }

    #[test]
    fn errors_name_the_place() {
        let e =
            ConfiguredCatalog::parse(r#"{"streams":[{"stream":{"name":"a"},"sync_mode":"sometimes"}]}"#).unwrap_err();
        assert!(e.to_string().contains("streams[0].sync_mode"), "{e}");
        let e = ConfiguredCatalog::parse(r#"{"streams":[]}"#).unwrap_err();
        assert!(e.to_string().contains("no streams"));
    }
}

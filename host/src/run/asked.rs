//! What a connector says of its streams before a read: which go through report jobs, which
//! resume inside a partition, whose states it shapes, which it reads in steps, and which config
//! fields its partitions read. Each is one short call; they are asked once per run, one after
//! the other on one instance (a fresh one only after a call failed, as a trap leaves an instance
//! unusable): the one that answered the spec probe and then discover
//! ([`crate::run::session::discover_and_ask`]), so a run pays no instantiation for them.

use crate::bindings::JobSettings;
use crate::data::protocol::{Output, OutputClosed};
use crate::guest::connector::{CallError, Connector, Instance};
use crate::run::logs::emit_logs;
use std::collections::HashSet;

/// The answers, each as the call gave it.
pub struct Answers {
    pub jobs: Result<Option<JobSettings>, CallError>,
    pub resumable: Result<HashSet<String>, CallError>,
    pub shaped: Result<HashSet<String>, CallError>,
    pub stepped: Result<HashSet<String>, CallError>,
    /// The instance that answered, when the last call left it usable (the run may shape states
    /// with it).
    pub instance: Option<Instance>,
}

/// One instance asked one question after another.
struct Asking<'c> {
    connector: &'c Connector,
    out: &'c Output,
    kept: Option<Instance>,
}

impl Asking<'_> {
    async fn ask<T>(
        &mut self,
        call: impl AsyncFnOnce(&mut Instance, &String) -> Result<T, CallError>,
    ) -> Result<Result<T, CallError>, OutputClosed> {
        let mut instance = match self.kept.take() {
            Some(instance) => instance,
            None => match self.connector.instance().await {
                Ok(instance) => instance,
                Err(e) => return Ok(Err(e)),
            },
        };
        let answer = call(&mut instance, &self.connector.config).await;
        emit_logs(self.out, instance.take_logs()).await?;
        if answer.is_ok() {
            self.kept = Some(instance);
        }
        Ok(answer)
    }
}

/// Asks the questions the plugin's exports allow (a plugin built for an older contract has no
/// answer to give, which is the empty one) of `instance` (a fresh one after a call failed), and
/// records the stepped streams on the connector.
pub async fn ask(connector: &Connector, out: &Output, instance: Instance) -> Result<Answers, OutputClosed> {
    let plugin = &connector.plugin;
    let mut asking = Asking { connector, out, kept: Some(instance) };
    let set = |streams: Vec<String>| streams.into_iter().collect::<HashSet<String>>();
    let jobs = match plugin.jobs.is_some() {
        true => asking.ask(async |i: &mut Instance, config: &String| i.job_settings(config).await).await?,
        false => Ok(None),
    };
    let resumable = match plugin.resume.is_some() {
        true => asking.ask(async |i: &mut Instance, config: &String| i.resumable_streams(config).await).await?.map(set),
        false => Ok(HashSet::new()),
    };
    let shaped = match plugin.shape.is_some() {
        true => asking.ask(async |i: &mut Instance, config: &String| i.shaped_streams(config).await).await?.map(set),
        false => Ok(HashSet::new()),
    };
    let stepped = match plugin.stepped.is_some() {
        true => asking.ask(async |i: &mut Instance, config: &String| i.stepped_streams(config).await).await?.map(set),
        false => Ok(HashSet::new()),
    };
    if plugin.partition_config.is_some() {
        let fields = asking.ask(async |i: &mut Instance, config: &String| i.partition_fields(config).await).await?;
        narrow(connector, out, fields).await?;
    }
    Ok(Answers { jobs, resumable, shaped, stepped, instance: asking.kept })
}

/// What a run (and the conformance kit) says of the config fields its partitions go without: a
/// config has tens of fields, and the line names twenty at most.
pub fn left_out_said(left_out: &[String]) -> String {
    let mut named = left_out.iter().take(20).cloned().collect::<Vec<_>>().join(", ");
    if left_out.len() > 20 {
        named.push_str(&format!(" and {} more", left_out.len() - 20));
    }
    format!("partitions are read without the config fields they do not use: {named}")
}

/// The most config fields a connector may name for its partitions: a config has tens.
const MAX_PARTITION_FIELDS: usize = 1000;

/// Hands the connector's partitions the config fields it named, or says why they get the whole.
async fn narrow(
    connector: &Connector,
    out: &Output,
    fields: Result<Option<Vec<String>>, CallError>,
) -> Result<(), OutputClosed> {
    let whole = "its partitions get the whole config";
    match fields {
        Ok(None) => Ok(()),
        Ok(Some(fields)) if fields.len() <= MAX_PARTITION_FIELDS => {
            let left_out = connector.narrow_partition_config(&fields);
            if left_out.is_empty() {
                return Ok(());
            }
            out.log("INFO", &left_out_said(&left_out)).await
        }
        Ok(Some(fields)) => {
            let message = format!(
                "the connector named {} config fields for its partitions, more than {MAX_PARTITION_FIELDS}: {whole}",
                fields.len()
            );
            out.log("WARN", &message).await
        }
        Err(e) => {
            let message =
                format!("the connector cannot say which config fields its partitions read ({}): {whole}", e.message());
            out.log("WARN", &message).await
        }
    }
}

/// Asks a fresh instance for a set of streams (`ask`: those that resume, those read in steps);
/// when it cannot say, a warning (`warning` says what the run does instead), and none. `out`,
/// when given, gets the connector's logs and the warning.
pub async fn ask_streams(
    connector: &Connector,
    out: Option<&Output>,
    ask: impl AsyncFnOnce(&mut Instance) -> Result<Vec<String>, CallError>,
    warning: impl FnOnce(&CallError) -> String,
) -> Result<HashSet<String>, OutputClosed> {
    let asked = match connector.instance().await {
        Ok(mut instance) => {
            let asked = ask(&mut instance).await;
            if let Some(out) = out {
                emit_logs(out, instance.take_logs()).await?;
            }
            asked
        }
        Err(e) => Err(e),
    };
    match asked {
        Ok(streams) => Ok(streams.into_iter().collect()),
        Err(e) => {
            if let Some(out) = out {
                out.log("WARN", &warning(&e)).await?;
            }
            Ok(HashSet::new())
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_list_of_fields_left_out_is_cut_short() {
        let names: Vec<String> = (0..25).map(|i| format!("f{i}")).collect();
        let said = super::left_out_said(&names);
        assert!(said.ends_with("f18, f19 and 5 more"), "{said}");
        assert_eq!(
            super::left_out_said(&names[..1]),
            "partitions are read without the config fields they do not use: f0"
        );
    }
}

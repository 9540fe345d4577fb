//! The Postgres destination's side of `sluice status`: the `_sluice` schema's topics and
//! checkpoints, read on a connection of its own with plain `SELECT`s (nothing is created: a
//! database without the schema holds no Sluice output, and says so).

use std::collections::BTreeMap;

use super::{connect, PostgresError, PostgresErrorKind, PostgresSettings};
use crate::checkpoint::Incarnation;
use crate::destination::{DestinationError, WritePolicy};
use crate::status::{StoredBoundedRun, StoredCheckpoints, StoredPosition, StoredTopic};

/// Every topic the database's `_sluice` schema records, with its checkpoints.
pub async fn describe(settings: &PostgresSettings) -> Result<Vec<StoredTopic>, DestinationError> {
    let failed = |action: &str, kind: PostgresErrorKind| {
        DestinationError::Postgres(Box::new(PostgresError {
            server: settings.display_url(),
            action: action.to_string(),
            kind,
        }))
    };
    let tls = match &settings.connection.tls {
        None => None,
        Some(ca) => {
            let tls_settings = sluice_wire::TlsSettings::new(ca.as_ref().map(|pem| pem.expose().to_string()));
            Some(
                sluice_wire::tls_client_config(&tls_settings)
                    .map_err(|error| failed("set up TLS", PostgresErrorKind::Tls(error)))?,
            )
        }
    };
    let driver = |action: &'static str| move |error| failed(action, PostgresErrorKind::Driver(error));
    let client = connect(settings, tls).await.map_err(driver("connect"))?;
    let present: bool = client
        .query_one(
            "SELECT to_regclass('_sluice.topics') IS NOT NULL AND to_regclass('_sluice.checkpoints') IS NOT NULL",
            &[],
        )
        .await
        .map_err(driver("look for the _sluice schema"))?
        .get(0);
    if !present {
        return Err(DestinationError::NoOutput { destination: settings.display_url() });
    }
    let topic_rows = client
        .query(
            "SELECT topic, connection_id, cluster_id, topic_id, shared, bounded_run, bounded_policy, bounded_finished, \
             bounded_connection_id, bounded_cluster_id, bounded_topic_id FROM _sluice.topics ORDER BY topic",
            &[],
        )
        .await
        .map_err(driver("read _sluice.topics"))?;
    let checkpoint_rows = client
        .query(
            "SELECT topic, mode, partition, next_offset, leader_epoch, fence, owner FROM _sluice.checkpoints \
             ORDER BY topic, mode, partition",
            &[],
        )
        .await
        .map_err(driver("read _sluice.checkpoints"))?;
    let mut positions: BTreeMap<(String, String), BTreeMap<i32, StoredPosition>> = BTreeMap::new();
    for row in &checkpoint_rows {
        let (topic, mode): (String, String) = (row.get(0), row.get(1));
        let fence: i64 = row.get(5);
        let owner: String = row.get(6);
        let position = StoredPosition {
            next_offset: row.get(3),
            leader_epoch: row.get(4),
            owner: (!owner.is_empty()).then(|| (owner, fence.max(0) as u64)),
        };
        positions.entry((topic, mode)).or_default().insert(row.get(2), position);
    }
    let incarnation = |connection: Option<String>, cluster: Option<String>, topic: Option<String>| {
        Some(Incarnation { connection_id: connection?, cluster_id: cluster?, topic_id: topic? })
    };
    let mut topics = Vec::new();
    for row in topic_rows {
        let topic: String = row.get(0);
        let continuous = incarnation(row.get(1), row.get(2), row.get(3)).map(|incarnation| StoredCheckpoints {
            incarnation,
            partitions: positions.remove(&(topic.clone(), "continuous".to_string())).unwrap_or_default(),
        });
        let run: Option<i64> = row.get(5);
        let policy: Option<String> = row.get(6);
        let bounded = match (run, incarnation(row.get(8), row.get(9), row.get(10))) {
            (Some(run), Some(incarnation)) => Some(StoredBoundedRun {
                run: run.max(0) as u64,
                policy: if policy.as_deref() == Some("replace") { WritePolicy::Replace } else { WritePolicy::Append },
                finished: row.get::<_, Option<bool>>(7).unwrap_or(false),
                checkpoints: StoredCheckpoints {
                    incarnation,
                    partitions: positions.remove(&(topic.clone(), "bounded".to_string())).unwrap_or_default(),
                },
            }),
            _ => None,
        };
        topics.push(StoredTopic { topic, shared: row.get(4), continuous, bounded });
    }
    Ok(topics)
}

//! A fetch through the cluster: asking the node that owns the object
//! (then each next node on the ring) before the origin, each request
//! marked as this node's, and what this node keeps of what an owner gave
//! it (`cluster_copy_ttl`).

use crate::fetch::mode::FetchMode;
use crate::host::backend_host::{Bereq, BereqBody, Beresp};
use crate::host::peers;
use crate::Shared;
use lacquer_backend::Conn;
use lacquer_core::params::Params;
use lacquer_http::ResponseHead;
use lacquer_shm::Tag;
use std::ops::ControlFlow;
use std::sync::Arc;

/// What a node keeps of an object another node of the cluster gave it:
/// at most `cluster_copy_ttl` seconds of it (TTL, then grace, then
/// keep), whatever VCL set. The owner keeps the object as long as it
/// says; the copy is for the hot objects this node's clients ask for.
pub(crate) fn keep_copy(sh: &Shared, bereq: &mut Bereq, beresp: &mut Beresp) {
    let at_most = sh.params.cluster_copy_ttl();
    let before = beresp.timers.lifetime();
    beresp.timers.cap_life(lacquer_core::time::now(), at_most);
    if beresp.timers.lifetime() < before {
        bereq.log.fmt(
            Tag::Debug,
            format_args!("cluster: a copy kept {at_most} s at most (cluster_copy_ttl)"),
        );
    }
}

/// Asks `peers` in turn, each marked as this node's and given
/// `cluster_connect_timeout` to connect, for the response to `head`: the
/// first that answers, or None when none could be reached (each failure
/// logged and counted, not the fetch's).
pub(crate) async fn ask_peers<'p, M: FetchMode>(
    sh: &Shared,
    bereq: &mut Bereq,
    mode: &mut M,
    peers: &'p [Arc<lacquer_backend::Backend>],
    head: &[u8],
    t: &lacquer_backend::Timeouts,
    limits: &lacquer_http::ResponseLimits,
) -> ControlFlow<M::Done, Option<(&'p lacquer_backend::Backend, Conn<'p>, ResponseHead)>> {
    let Some(cluster) = sh.cluster.as_ref().filter(|_| !peers.is_empty()) else {
        return ControlFlow::Continue(None);
    };
    let t = lacquer_backend::Timeouts {
        connect: Params::duration(sh.params.cluster_connect_timeout()),
        ..*t
    };
    let head = peers::marked(head, &cluster.mark(&bereq.method, &bereq.url));
    for peer in peers {
        match mode
            .exchange(bereq, peer, &head, BereqBody::None, &t, limits)
            .await?
        {
            Ok((conn, mut resp)) => {
                cluster.count_fetch(peer, true);
                // The owner's transaction ids are its own: the client
                // sees this node's, as from one cache (`Via` names both).
                resp.headers.remove("x-varnish");
                return ControlFlow::Continue(Some((peer, conn, resp)));
            }
            Err(e) => {
                cluster.count_fetch(peer, false);
                bereq.log.fmt(
                    Tag::Debug,
                    format_args!("cluster: {} did not answer: {}", peer.name, e),
                );
            }
        }
    }
    ControlFlow::Continue(None)
}

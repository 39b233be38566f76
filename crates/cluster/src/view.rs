//! What one node knows of the cluster at a moment: every node it has
//! heard of and its state, and the ring over the nodes that take
//! requests (alive, or suspected but not yet down), built as
//! `directors.shard()` builds its ring, from the nodes' names in name
//! order, so that every node with the same members computes the same
//! owner for a key, and varnishd's shard director does too.

use crate::node::Node;
use lacquer_core::ring::Ring;

/// A node's state, as SWIM judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    Alive,
    /// Missed its probes: still routed to until it is judged down.
    Suspect,
    Down,
}

impl NodeState {
    /// The word `cluster.list` prints.
    pub fn word(self) -> &'static str {
        match self {
            NodeState::Alive => "alive",
            NodeState::Suspect => "suspect",
            NodeState::Down => "down",
        }
    }

    /// Whether the ring includes a node in this state.
    pub fn routable(self) -> bool {
        self != NodeState::Down
    }
}

/// One node in a view.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub node: Node,
    pub state: NodeState,
    /// Its share of the keys (0 when it is not on the ring).
    pub share: f64,
    /// This node itself.
    pub me: bool,
    /// Where it stands with invalidations, as it last said (this node's
    /// own for itself); None until it has said.
    pub standing: Option<crate::standing::Standing>,
}

/// One node's view of the cluster.
#[derive(Debug, Default)]
pub struct View {
    /// Every node heard of, in name order (this one included).
    pub nodes: Vec<NodeInfo>,
    ring: Ring,
    /// The index in `nodes` of each ring member.
    members: Vec<usize>,
}

impl View {
    /// The view of `me` and the `others` it has heard of, each point of
    /// the ring `replicas` times.
    pub fn new(
        me: &Node,
        others: impl IntoIterator<Item = (Node, NodeState)>,
        replicas: u32,
    ) -> View {
        let mut nodes: Vec<NodeInfo> = std::iter::once((me.clone(), NodeState::Alive, true))
            .chain(others.into_iter().map(|(n, s)| (n, s, false)))
            .map(|(node, state, me)| NodeInfo {
                node,
                state,
                share: 0.0,
                me,
                standing: None,
            })
            .collect();
        // One entry a name: a node restarted is known by its later run.
        nodes.sort_by(|a, b| {
            a.node
                .name
                .cmp(&b.node.name)
                .then(b.node.run.cmp(&a.node.run))
        });
        nodes.dedup_by(|later, kept| later.node.name == kept.node.name);
        let members: Vec<usize> = (0..nodes.len())
            .filter(|&i| nodes[i].state.routable())
            .collect();
        let points: Vec<(&[u8], u32)> = members
            .iter()
            .map(|&i| (nodes[i].node.name.as_bytes(), replicas))
            .collect();
        let ring = Ring::build(&points);
        for (share, &i) in ring.shares().into_iter().zip(&members) {
            nodes[i].share = share;
        }
        View {
            nodes,
            ring,
            members,
        }
    }

    /// The node that owns `key`.
    pub fn owner(&self, key: u32) -> Option<&NodeInfo> {
        self.ring.owner(key).map(|m| &self.nodes[self.members[m]])
    }

    /// The nodes that may take `key`, the owner first, then each next one
    /// on the ring (where a request goes when the ones before fail).
    pub fn candidates(&self, key: u32) -> impl Iterator<Item = &NodeInfo> {
        self.ring.walk(key).map(|m| &self.nodes[self.members[m]])
    }

    /// How many nodes take requests.
    pub fn routable(&self) -> usize {
        self.members.len()
    }

    /// The node itself.
    pub fn me(&self) -> Option<&NodeInfo> {
        self.nodes.iter().find(|n| n.me)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn node(name: &str, run: u64) -> Node {
        Node {
            name: Arc::from(name),
            addr: "127.0.0.1:1".parse().unwrap(),
            http: "127.0.0.1:2".parse().unwrap(),
            run,
        }
    }

    #[test]
    fn the_ring_is_the_shard_directors_over_the_routable_names() {
        let v = View::new(
            &node("b", 1),
            [
                (node("a", 1), NodeState::Alive),
                (node("c", 1), NodeState::Suspect),
                (node("d", 1), NodeState::Down),
            ],
            67,
        );
        assert_eq!(v.routable(), 3);
        let names: Vec<&str> = v.nodes.iter().map(|n| &*n.node.name).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(v.nodes[3].share, 0.0);
        let total: f64 = v.nodes.iter().map(|n| n.share).sum();
        assert!((total - 1.0).abs() < 1e-9);
        // The same owner as the shard director's ring of a, b, c.
        let ring = Ring::build(&[
            (b"a".as_slice(), 67),
            (b"b".as_slice(), 67),
            (b"c".as_slice(), 67),
        ]);
        for key in (0..u32::MAX).step_by(7_777_777) {
            let want = ["a", "b", "c"][ring.owner(key).unwrap()];
            assert_eq!(&*v.owner(key).unwrap().node.name, want);
            let walk: Vec<&str> = v.candidates(key).map(|n| &*n.node.name).collect();
            assert_eq!(walk.len(), 3);
            assert_eq!(walk[0], want);
        }
        assert!(v.me().is_some_and(|m| &*m.node.name == "b"));
    }

    #[test]
    fn a_restarted_node_is_known_by_its_later_run() {
        let v = View::new(
            &node("a", 1),
            [
                (node("b", 1), NodeState::Down),
                (node("b", 2), NodeState::Alive),
            ],
            67,
        );
        assert_eq!(v.nodes.len(), 2);
        assert_eq!(
            (v.nodes[1].node.run, v.nodes[1].state),
            (2, NodeState::Alive)
        );
        assert_eq!(v.routable(), 2);
    }
}

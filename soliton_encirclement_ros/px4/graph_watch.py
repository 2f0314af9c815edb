"""
What the ROS graph says about this bridge's PX4: other setpoint writers, and message versions.

Two setpoint streams to one PX4 interleave and the vehicle flies neither: :class:`GraphWatch`
names every other writer of the vehicle's ``/fmu/in/`` setpoint topics (a twin of this bridge,
the same launch started twice, included) for the sequencer. A px4_msgs that does not match the
firmware listens on topic names PX4 never publishes: it names that too, instead of waiting
silently. Needs a node (rclpy); the node wires its timers and subscriptions to it.
"""
import math
import re

from ros_support.topics import publisher_node

TWIN_SILENCE = 3.0  # s after its last ~/status a twin of this bridge no longer counts
_VERSION_SUFFIX = re.compile(r'_v(\d+)$')


def other_versions(topic, topic_names):
    """
    Return the names in ``topic_names`` that are ``topic`` under another message version.

    PX4 >= 1.16 appends ``_v<MESSAGE_VERSION>`` to versioned topics, and px4_msgs must match the
    firmware: a bridge built against another px4_msgs listens on a name this PX4 never
    publishes (``vehicle_status_v4`` where PX4 publishes ``vehicle_status_v2``, or no suffix).
    """
    base = _VERSION_SUFFIX.sub('', topic)
    return sorted(name for name in topic_names if name != topic
                  and (name == base or (name.startswith(base + '_v')
                                        and _VERSION_SUFFIX.sub('', name) == base)))


def version_mismatch_text(topic, others, type_name):
    """One line: PX4 publishes ``others``, the bridge listens on ``topic``; what to build."""
    def version(name):
        match = _VERSION_SUFFIX.search(name)
        return int(match.group(1)) if match else 0
    theirs = ', '.join(others)
    wanted = ' or '.join(sorted({f'MESSAGE_VERSION {version(name)}' for name in others}))
    return (f'PX4 publishes {theirs} but this bridge listens on {topic}: its px4_msgs does not '
            f'match the firmware; build the px4_msgs branch whose {type_name} has {wanted} (the '
            'release of the PX4 firmware, docs/px4/index.md step 1), or set '
            'message_version_suffix if PX4 publishes no suffix')


class GraphWatch:
    """
    Look at the graph once a second for the bridge ``node`` and tell its sequencer ``seq``.

    ``topics`` (name -> topic) and ``topic_types`` (topic -> px4_msgs type name) are the
    node's PX4 topics; ``steady_now`` its steady clock; ``incarnation`` its own (a ~/status
    with this node's name and another incarnation is a twin's).
    """

    def __init__(self, node, seq, topics, topic_types, steady_now, incarnation):
        self._node = node
        self._seq = seq
        self._topics = topics
        self._topic_types = topic_types
        self._steady_now = steady_now
        self._incarnation = str(incarnation)
        self._unnamed_seen = False  # a setpoint writer of an undiscovered node at the last look
        self._version_hints = set()  # version mismatches already warned about
        # The heartbeats heard on this vehicle's offboard_control_mode against those sent: more
        # heard than sent is another writer at work (a twin of this bridge: same name).
        self._heartbeats = {'sent': 0, 'heard': 0, 'looked': (0, 0)}
        self._twin_heard = -math.inf  # steady time of a ~/status of another incarnation

    def heartbeat_sent(self):
        self._heartbeats['sent'] += 1

    def on_heartbeat_heard(self, msg):
        self._heartbeats['heard'] += 1

    def on_own_status(self, msg):
        """Note a ~/status of this node's name from another incarnation: a twin of it."""
        if any(kv.key == 'incarnation' and kv.value != self._incarnation
               for kv in msg.values):
            self._twin_heard = self._steady_now()

    def look_for_other_publishers(self):
        """
        Tell the sequencer who else publishes on this vehicle's ``/fmu/in/`` setpoint topics.

        The offboard heartbeat and the setpoints: two such streams interleave, and the vehicle
        flies neither. A writer of ``vehicle_command`` alone (a ground station's tool switching
        a mode) streams nothing and is not one. By what is published, not by name: this bridge
        writes each topic once, so any further writer is another, a twin with this node's own
        name and namespace (the same launch started twice) included. A writer whose node is not
        discovered yet (rmw's ``_NODE_NAME_UNKNOWN_``) is named only when it is still unnamed at
        the next look: a non-ROS DDS writer.
        """
        node = self._node
        me = (node.get_name(), node.get_namespace())
        topics = (self._topics['offboard_control_mode'], self._topics['trajectory_setpoint'])
        names, twins = [], 0
        for topic in topics:
            mine = 0
            for info in node.get_publishers_info_by_topic(topic):
                if (info.node_name, info.node_namespace) == me:
                    mine += 1
                else:
                    names.append(publisher_node(info))
            twins = max(twins, mine - 1)
        unnamed = None in names
        others = {name or 'a DDS writer of no ROS node' for name in names
                  if name is not None or self._unnamed_seen}
        # A writer of this node's own name counts once it writes, or once its ~/status speaks
        # with another incarnation (an idle bridge writes nothing to PX4): a bridge that died
        # leaves its endpoints in the graph until its DDS lease ends, and says nothing.
        beats = self._heartbeats
        sent, heard = beats['sent'] - beats['looked'][0], beats['heard'] - beats['looked'][1]
        beats['looked'] = (beats['sent'], beats['heard'])
        twin_speaks = self._steady_now() - self._twin_heard <= TWIN_SILENCE
        if twins and (heard > sent + max(2, sent // 3) or twin_speaks):
            others.add(f'{node.get_fully_qualified_name()} (another bridge with this one'
                       "'s own name: the same launch started twice?)")
        self._unnamed_seen = unnamed
        self._seq.on_other_publishers(self._steady_now(), others, ', '.join(topics))

    def look_for_other_versions(self):
        """
        Name a px4_msgs that does not match the firmware, instead of waiting silently.

        A PX4 topic this bridge reads with no writer (or writes with no reader but its own),
        whose name exists in the graph under another ``_vN``: one WARN per topic, and the engage
        refusal for a missing vehicle_status says it.
        """
        node = self._node
        names = [name for name, _ in node.get_topic_names_and_types()]
        hints = []
        for topic, type_name in self._topic_types.items():
            if '/fmu/out/' in topic:
                unheard = node.count_publishers(topic) == 0
            else:  # this bridge reads its own offboard_control_mode (twins): not PX4's reader
                own = 1 if topic == self._topics['offboard_control_mode'] else 0
                unheard = node.count_subscribers(topic) <= own
            others = other_versions(topic, names) if unheard else []
            if others:
                hints.append(version_mismatch_text(topic, others, type_name))
        for hint in hints:
            if hint not in self._version_hints:
                self._version_hints.add(hint)
                node.get_logger().warning(hint)
        self._seq.link_hint = hints[0] if hints else None

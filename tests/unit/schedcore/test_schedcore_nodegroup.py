"""nodegroup: queue node-group affinity, as Volcano's plugin filters and scores (ed72c7c81)."""

from __future__ import annotations

import pytest

from hyperjob.schedcore import DEFAULT_CONF_TEXT, ConfError, Scheduler, parse_conf
from hyperjob.schedcore.testing import job, node, queue, snapshot

CONF = DEFAULT_CONF_TEXT + "  - name: nodegroup\n"
LOOSE = DEFAULT_CONF_TEXT + "  - name: nodegroup\n    arguments: {strict: false}\n"


def grouped(name, group=None, cpu=4):
    n = node(name).cpu(cpu).mem("16Gi").pods(10)
    return n.labels({"volcano.sh/nodegroup-name": group}) if group else n


def placed(conf, nodes, jobs, queues):
    decision = Scheduler(parse_conf(conf)).cycle(snapshot(nodes, queues, jobs))
    return {b.task: b.node for b in decision.binds}


NODES = [grouped("a1", "groupa"), grouped("b1", "groupb"), grouped("plain")]


def test_required_group_keeps_the_queues_pods_in_it():
    binds = placed(CONF, NODES, [job("j", "q").tasks(3, cpu=1)], [queue("q").nodegroups(required=["groupb"])])
    assert set(binds.values()) == {"b1"}


def test_preferred_group_wins_the_score_but_required_groups_stay_open():
    queues = [queue("q").nodegroups(required=["groupa"], preferred=["groupb"])]
    binds = placed(CONF, NODES, [job("j", "q").tasks(1, cpu=1)], queues)
    assert set(binds.values()) == {"a1"}  # required scores 100, preferred 50
    binds = placed(CONF, NODES, [job("j", "q").tasks(6, cpu=1)], queues)
    assert set(binds.values()) == {"a1", "b1"}  # both admitted; never the unlabeled node


def test_required_anti_affinity_excludes_a_group_preferred_anti_affinity_only_scores_it_down():
    queues = [queue("q").nodegroups(anti_required=["groupa"], anti_preferred=["groupb"])]
    binds = placed(CONF, NODES, [job("j", "q").tasks(2, cpu=1)], queues)
    assert set(binds.values()) == {"b1"}


def test_strict_keeps_queues_without_affinity_off_every_node_loose_lets_them_use_unlabeled_ones():
    jobs, queues = [job("j", "default").tasks(2, cpu=1)], [queue("default")]
    assert placed(CONF, NODES, jobs, queues) == {}
    assert set(placed(LOOSE, NODES, jobs, queues).values()) == {"plain"}


def test_two_queues_with_the_same_pod_shape_get_their_own_groups():
    queues = [queue("qa").nodegroups(required=["groupa"]), queue("qb").nodegroups(required=["groupb"])]
    jobs = [job("ja", "qa").tasks(1, cpu=1), job("jb", "qb").tasks(1, cpu=1)]
    assert placed(CONF, NODES, jobs, queues) == {"ja-task-0": "a1", "jb-task-0": "b1"}


def test_hierarchy_lets_a_queue_without_affinity_inherit_its_parents():
    conf = DEFAULT_CONF_TEXT + "  - name: nodegroup\n    enableHierarchy: true\n"
    queues = [queue("root"), queue("team").parent("root").nodegroups(required=["groupb"]), queue("dev").parent("team")]
    assert set(placed(conf, NODES, [job("j", "dev").tasks(2, cpu=1)], queues).values()) == {"b1"}
    assert placed(CONF, NODES, [job("j", "dev").tasks(2, cpu=1)], queues) == {}  # no inheritance without it


def test_unknown_argument_is_refused():
    with pytest.raises(ConfError, match="stric"):
        parse_conf(DEFAULT_CONF_TEXT + "  - name: nodegroup\n    arguments: {stric: false}\n")

"""Queue hierarchy written as Volcano's ``volcano.sh/hierarchy`` annotations (hierarchical DRF) is
refused by name, never silently dropped (issue 29); the tree here is ``spec.parent``."""

from __future__ import annotations

import pytest
import yaml

from hyperjob import api

# volcano-sh/volcano example/hierarchical-jobs/queues.yaml (the first queue)
VOLCANO_EXAMPLE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: root-eng-prod
  annotations:
    "volcano.sh/hierarchy": "root/eng/prod"
    "volcano.sh/hierarchy-weights": "1/2/8"
spec:
  weight: 1
"""


def test_volcanos_hierarchical_queue_is_refused_naming_the_annotation():
    with pytest.raises(api.ManifestError) as error:
        api.decode(yaml.safe_load(VOLCANO_EXAMPLE))
    assert "metadata.annotations.volcano.sh/hierarchy: hierarchical DRF" in str(error.value)
    assert "spec.parent" in error.value.message


def test_an_invalid_hierarchy_gets_volcanos_webhook_message_first():
    document = yaml.safe_load(VOLCANO_EXAMPLE)
    document["metadata"]["annotations"]["volcano.sh/hierarchy-weights"] = "1/2"
    with pytest.raises(api.ManifestError) as error:
        api.decode(document)
    assert "must have one weight per level" in error.value.message


def test_a_queue_tree_declared_with_parent_is_accepted():
    document = yaml.safe_load(VOLCANO_EXAMPLE)
    document["metadata"].pop("annotations")
    document["spec"]["parent"] = "eng"
    queue = api.decode(document)
    assert isinstance(queue, api.Queue) and queue.spec.parent == "eng"

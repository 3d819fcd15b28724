"""The dataset plugins through the registry: every name listed, with provenance, and NAME:ARG names."""

from __future__ import annotations

import pytest

from dpgym.registry import PluginError

NAMES = ["intrusion", "intrusion23", "census", "lifesci", "covertype", "half_moons", "pinwheel", "eight_gaussians", "checkerboard", "csv",
         "benefits", "caravan", "cps1988", "diamonds", "fertility", "flights", "nass_cds", "wage"]


def test_every_dataset_is_registered_with_citation_licence_and_checksum(registry):
    for name in NAMES:
        spec = registry.dataset(name)
        assert spec.citation and spec.license and spec.description
        if name != "csv":  # csv alone is a family; each csv:PATH has its file's checksum
            assert len(spec.checksum) == 64


def test_a_name_argument_for_a_dataset_without_variants_is_an_error(registry):
    with pytest.raises(PluginError, match="'adult_expm' takes no ':' argument"):
        registry.dataset("adult_expm:fold=2")


def test_an_unknown_prefix_is_still_an_unknown_dataset(registry):
    with pytest.raises(PluginError, match="unknown dataset 'lifesciences:fold=2'"):
        registry.dataset("lifesciences:fold=2")

"""A dependency set's specifiers and digest (domain/deps.py; docs/dependencies.md): one
canonical form per package, a digest of the canonical set, nothing pip or npm would read as
an option, a URL or a marker, and the install task's command kind."""

from __future__ import annotations

import pytest

from qinglong.domain.deps import DepSet, check_node, check_python, digest_of
from qinglong.domain.task import CommandSpec, DepsInstallCommand, parse_command_config
from qinglong.errors import InvalidInput


@pytest.mark.parametrize(("spec", "key", "text"), [
    ("requests", "requests", "requests"),
    ("Requests == 2.32.*", "requests", "requests==2.32.*"),
    ("zope.interface>=5, <7", "zope-interface", "zope-interface>=5,<7"),
    ("Pkg_Name[Socks , http2]~=1.4", "pkg-name", "pkg-name[http2,socks]~=1.4"),
    ("a===1.0+local", "a", "a===1.0+local"),
])
def test_python_specifiers_have_one_canonical_form(spec: str, key: str, text: str) -> None:
    assert check_python(spec) == (key, text)


@pytest.mark.parametrize(("spec", "key", "text"), [
    ("axios", "axios", "axios"),
    ("axios@1", "axios", "axios@1"),
    ("@scope/pkg@^2.1", "@scope/pkg", "@scope/pkg@^2.1"),
    ("lodash@>=4 <5", "lodash", "lodash@>=4 <5"),
    ("tiny@file:/srv/pkgs/tiny-1.0.0.tgz", "tiny", "tiny@file:/srv/pkgs/tiny-1.0.0.tgz"),
])
def test_node_specifiers(spec: str, key: str, text: str) -> None:
    assert check_node(spec) == (key, text)


@pytest.mark.parametrize("spec", ["", "-e .", "--index-url=x", "requests;python_version<'3'",
                                  "pkg @ https://x/y.whl", "requests==1 && rm", "re quests",
                                  "requests==$(id)", "a" * 201, "requests\n==1"])
def test_bad_python_specifiers(spec: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_python(spec)
    assert caught.value.field == "python"


@pytest.mark.parametrize("spec", ["", "-g", "--registry=x", "Axios", "axios@", "axios@1;id",
                                  "git+https://x/y.git", "github:x/y", "axios@file:rel.tgz",
                                  "axios@$(id)", "http://x/y.tgz"])
def test_bad_node_specifiers(spec: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_node(spec)
    assert caught.value.field == "node"


def test_the_digest_is_of_the_canonical_set() -> None:
    one = DepSet.of(["Requests==2.32.*", "qltiny"], ["axios@1"])
    two = DepSet.of(["qltiny", "requests == 2.32.*"], ["axios@1"])
    assert one == two and one.digest == two.digest
    assert one.python == ("qltiny", "requests==2.32.*")
    assert one.digest == digest_of(one.python, one.node)
    assert DepSet.of(["qltiny"]).digest != DepSet.of([], ["qltiny"]).digest
    assert DepSet.from_json(one.to_json()) == one
    with pytest.raises(InvalidInput):
        DepSet.from_json({"python": ["Requests"], "node": []})  # not canonical


def test_a_later_specifier_replaces_and_removal_is_by_name() -> None:
    deps = DepSet.of(["requests==2.31"]).adding(["requests>=2.32"], ["axios"])
    assert deps.python == ("requests>=2.32",) and deps.node == ("axios",)
    assert deps.removing(["Requests"], []).python == ()
    with pytest.raises(InvalidInput):
        deps.removing([], ["lodash"])


def test_the_install_task_kind_round_trips() -> None:
    config = CommandSpec(command=DepsInstallCommand()).config_json()
    assert config["command"] == {"kind": "deps"}
    assert parse_command_config(config).command == DepsInstallCommand()
    with pytest.raises(InvalidInput):
        parse_command_config({**config, "command": {"kind": "deps", "argv": ["x"]}})

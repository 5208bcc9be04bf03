import json

import pytest
from _repo import discover, select_changed

ALL = ["paperstack-core", "alpha", "alpha-vision"]


def listed(proc):
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def branch(repo):
    repo.git("checkout", "-q", "-b", "feature")


def test_a_package_change_selects_that_package_only(repo):
    branch(repo)
    repo.write("packages/alpha/src/alpha/core.py", "X = 1\n")
    repo.commit("alpha: add core")
    assert listed(repo.changed("--base", "main")) == ["alpha"]


def test_a_package_name_prefix_does_not_select_its_sibling(repo):
    branch(repo)
    repo.write("packages/alpha-vision/README.md", "# vision\n")
    repo.commit("alpha-vision: readme")
    assert listed(repo.changed("--base", "main")) == ["alpha-vision"]


@pytest.mark.parametrize(
    "path",
    [
        "shared/src/paperstack/records.py",
        "noxfile.py",
        "pyproject.toml",
        "tools/constraints.txt",
        ".github/workflows/ci.yml",
        ".ci/run",
    ],
)
def test_core_and_tooling_changes_select_everything(repo, path):
    branch(repo)
    repo.write(path, "# changed\n")
    repo.commit(f"change {path}")
    assert listed(repo.changed("--base", "main")) == ALL


def test_docs_outside_packages_select_nothing(repo):
    branch(repo)
    repo.write("README.md", "# new words\n")
    repo.commit("docs")
    proc = repo.changed("--base", "main", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_json_lists_for_the_ci_matrix(repo):
    branch(repo)
    repo.write("packages/alpha/x.txt", "x\n")
    repo.write("packages/alpha-vision/x.txt", "x\n")
    repo.commit("both")
    proc = repo.changed("--base", "main", "--json")
    assert json.loads(proc.stdout) == ["alpha", "alpha-vision"]


def test_all_lists_every_package(repo):
    assert json.loads(repo.changed("--all", "--json").stdout) == ALL


def test_diff_is_against_the_merge_base_not_the_tip_of_base(repo):
    branch(repo)
    repo.write("packages/alpha/a.txt", "a\n")
    repo.commit("alpha work")
    repo.git("checkout", "-q", "main")
    repo.write("shared/src/paperstack/new.py", "Y = 2\n")  # lands on main after the branch
    repo.commit("core work on main")
    repo.git("checkout", "-q", "feature")
    assert listed(repo.changed("--base", "main")) == ["alpha"]


def test_uncommitted_and_untracked_work_counts(repo):
    branch(repo)
    repo.write("packages/alpha-vision/new_module.py", "Z = 3\n")  # untracked
    assert listed(repo.changed("--base", "main")) == ["alpha-vision"]


def test_a_deleted_package_is_not_listed(repo):
    branch(repo)
    repo.git("rm", "-q", "-r", "packages/alpha-vision")
    repo.commit("drop alpha-vision")
    assert listed(repo.changed("--base", "main")) == []


def test_an_unknown_base_is_a_one_line_error(repo):
    proc = repo.changed("--base", "no-such-ref")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith("changed-packages: error: git merge-base")


def test_select_changed_maps_paths(repo):
    packages = discover(repo.root)
    names = lambda files: [p.dist for p in select_changed(files, packages, repo.root)]  # noqa: E731
    assert names(["packages/alpha/pyproject.toml"]) == ["alpha"]
    assert names(["packages/alpha"]) == []  # a path that is not inside the package
    assert names(["shared/README.md"]) == ALL
    assert names(["reports/index.md", "README.md"]) == []


def test_empty_packages_dir_is_fine(tmp_path):
    (tmp_path / "packages").mkdir()
    assert discover(tmp_path) == []


def test_with_cli_keeps_only_packages_with_a_command_line(repo):
    repo.write(
        "packages/beta/pyproject.toml",
        """\
        [project]
        name = "beta"
        dynamic = ["version"]

        [tool.hatch.build.targets.wheel]
        packages = ["src/beta"]
        """,
    )
    repo.write("packages/beta/src/beta/__init__.py", '__version__ = "0.1.0"\n')
    repo.commit("beta: a library without a CLI")
    assert listed(repo.changed("--all")) == [*ALL, "beta"]
    proc = repo.changed("--all", "--with-cli", "--json")
    assert json.loads(proc.stdout) == ALL

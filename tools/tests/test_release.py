import re

import pytest


def version_of(repo, dist="alpha", imp="alpha"):
    text = (repo.root / f"packages/{dist}/src/{imp}/__init__.py").read_text()
    return re.search(r'__version__ = "(.*)"', text).group(1)


def tags(repo):
    return repo.git("tag", "--list").split()


def test_patch_release_bumps_logs_commits_and_tags(repo):
    repo.write("packages/alpha/src/alpha/loss.py", "L = 1\n")
    repo.commit("alpha: add the loss")
    repo.write("packages/alpha-vision/x.py", "V = 1\n")
    repo.commit("alpha-vision: unrelated work")
    proc = repo.release("alpha", "patch", "--date", "2026-01-02")
    assert proc.returncode == 0, proc.stderr
    assert version_of(repo) == "0.1.1"
    changelog = (repo.root / "packages/alpha/CHANGELOG.md").read_text()
    assert "## 0.1.1 (2026-01-02)\n\n- alpha: add the loss\n- initial\n" in changelog
    assert "unrelated" not in changelog
    assert changelog.startswith("# Changelog\n\nAll notable changes to alpha.\n\n## 0.1.1")
    assert "alpha-v0.1.1" in tags(repo)
    assert repo.git("log", "-1", "--format=%s").strip() == "release(alpha): v0.1.1"
    assert repo.git("status", "--porcelain").strip() == ""


def test_next_release_lists_only_commits_since_the_previous_tag(repo):
    assert repo.release("alpha", "minor", "--date", "2026-01-02").returncode == 0
    repo.write("packages/alpha/src/alpha/more.py", "M = 1\n")
    repo.commit("alpha: more")
    proc = repo.release("alpha", "major", "--date", "2026-02-03")
    assert proc.returncode == 0, proc.stderr
    changelog = (repo.root / "packages/alpha/CHANGELOG.md").read_text()
    newest = changelog.split("## 1.0.0 (2026-02-03)\n\n")[1].split("\n\n## 0.2.0")[0]
    assert newest.strip() == "- alpha: more"
    assert changelog.index("## 1.0.0") < changelog.index("## 0.2.0")
    assert {"alpha-v0.2.0", "alpha-v1.0.0"} <= set(tags(repo))


def test_dry_run_changes_nothing(repo):
    head = repo.git("rev-parse", "HEAD")
    proc = repo.release("alpha", "patch", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "0.1.0 -> 0.1.1" in proc.stdout
    assert "would commit" in proc.stdout
    assert version_of(repo) == "0.1.0"
    assert repo.git("rev-parse", "HEAD") == head
    assert tags(repo) == []


def test_no_tag_commits_without_tagging(repo):
    assert repo.release("alpha", "patch", "--no-tag").returncode == 0
    assert version_of(repo) == "0.1.1"
    assert tags(repo) == []


def test_first_release_of_the_current_version(repo):
    proc = repo.release("alpha", "0.1.0")
    assert proc.returncode == 0, proc.stderr
    assert "(no bump)" in proc.stdout
    assert version_of(repo) == "0.1.0"
    assert tags(repo) == ["alpha-v0.1.0"]
    again = repo.release("alpha", "0.1.0")
    assert again.returncode == 2
    assert "already exists" in again.stderr


def test_sibling_tags_with_a_common_prefix_are_not_confused(repo):
    assert repo.release("alpha-vision", "1.0.0").returncode == 0
    repo.write("packages/alpha/a.py", "A = 1\n")
    repo.commit("alpha: a")
    assert repo.release("alpha", "patch").returncode == 0
    changelog = (repo.root / "packages/alpha/CHANGELOG.md").read_text()
    assert "- initial" in changelog  # since the start, not since alpha-vision-v1.0.0
    assert set(tags(repo)) == {"alpha-vision-v1.0.0", "alpha-v0.1.1"}


def test_core_release_tag(repo):
    repo.write("shared/src/paperstack/records.py", "R = 1\n")
    repo.commit("core: records")
    assert repo.release("paperstack-core", "minor").returncode == 0
    assert "paperstack-core-v0.2.0" in tags(repo)
    assert "- core: records" in (repo.root / "shared/CHANGELOG.md").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "patch"], "no package named 'nope'"),
        (["alpha", "0.0.9"], "lower than the current 0.1.0"),
        (["alpha", "banana"], "use major, minor, patch or X.Y.Z"),
    ],
)
def test_bad_arguments_are_one_line_errors(repo, args, message):
    proc = repo.release(*args)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert message in proc.stderr


def test_refuses_uncommitted_changelog_edits(repo):
    repo.write("packages/alpha/CHANGELOG.md", "# Changelog\n\nhand edit\n")
    proc = repo.release("alpha", "patch")
    assert proc.returncode == 2
    assert "uncommitted changes" in proc.stderr
    assert version_of(repo) == "0.1.0"


def test_check_tag(repo):
    ok = repo.release("--check-tag", "alpha-vision-v0.1.0")
    assert ok.returncode == 0, ok.stderr
    assert "dist=alpha-vision\npath=packages/alpha-vision\nversion=0.1.0" in ok.stdout
    bad = repo.release("--check-tag", "alpha-v9.9.9")
    assert bad.returncode == 2
    assert "says 0.1.0" in bad.stderr
    assert repo.release("--check-tag", "garbage").returncode == 2

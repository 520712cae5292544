"""``ctxgate bundles push`` as a user runs it: a subprocess, a real git repository made here,
the live server of tests/client on the real stores.

Checks: a push registers the runtime's tracked files as committed (untracked ones never go)
with the repository and commit from git; a second push of the same content registers nothing
and says so; ``--promote`` makes a turn with ``workspace.bundle_id`` see AGENTS.md (the
issue's "done when"); a new commit is a new revision; Claude Code's rules and imports are
followed, symlinks read as their tracked targets; a canary promotion; a revision id taken
by another runtime is refused; uncommitted changes are refused unless ``--allow-dirty``; bad
input (not a work tree, no commit, an unknown runtime, no key) exits 2 with nothing
registered; a server that is down or a key that is not an admin's exits 1.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from ctxgate_client import AsyncCtxgateClient, NotFoundError

from app.core.bundles.checkout import ROOT_MARKER
from app.integrations.checkout import read_checkout
from tests.client.conftest import ADMIN_TOKEN
from tests.integrations.conftest import PYTHON

AGENTS = "Payments repo rules: run `make refund-check` before each commit. Marker PX-4471."
CLAUDE = "Claude notes for the payments repo.\n\nSee @docs/style.md for the style guide."
STYLE = "Style: wrap at 100 columns."
RULE = "Never log card numbers."


@dataclass(frozen=True, slots=True)
class Admin:
    url: str
    tenant: str
    key: str  # an admin key of the tenant
    runtime_key: str  # for turns: an admin key may not assemble

    def env(self, **extra: str) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
                "CTXGATE_URL": self.url, "CTXGATE_API_KEY": self.key, **extra}

    def client(self) -> AsyncCtxgateClient:
        return AsyncCtxgateClient(self.url, self.key)


@pytest.fixture(scope="module")
async def admin(live_url: str) -> Admin:
    tenant = f"tp{uuid.uuid4().hex[:8]}"
    async with AsyncCtxgateClient(live_url, ADMIN_TOKEN) as platform:
        made = await platform.create_key(tenant_id=tenant, role="admin",
                                         max_data_level="confidential")
        runtime = await platform.create_key(tenant_id=tenant, role="runtime")
    return Admin(url=live_url, tenant=tenant, key=made.api_key, runtime_key=runtime.api_key)


def git(repo: Path, *args: str) -> str:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(repo.parent),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def write(repo: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A work tree with AGENTS.md, CLAUDE.md (importing docs/style.md) and a project rule
    committed, and instruction files left untracked (CLAUDE.local.md, sub/AGENTS.md)."""
    root = tmp_path / "payments-api"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, {"AGENTS.md": AGENTS, "CLAUDE.md": CLAUDE, "docs/style.md": STYLE,
                 ".claude/rules/x.md": RULE, "src/app.py": "print('hi')\n"})
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "instructions")
    write(root, {"CLAUDE.local.md": "untracked local notes", "sub/AGENTS.md": "untracked"})
    return root


def push(admin: Admin, path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "app.cli", "bundles", "push", str(path), *args],
                          capture_output=True, text=True, env=admin.env(**env), timeout=120,
                          check=False)


def bundle_id() -> str:
    return f"repo/payments-{uuid.uuid4().hex[:6]}"  # a '/' in it, as users name them


async def files_of(admin: Admin, bid: str, revision: str) -> dict[str, str]:
    async with admin.client() as ctx:
        rev = await ctx.get_bundle_revision(bid, revision)
    return {f["path"]: f["content"] for f in rev.files or []}


async def test_push_noop_promote_and_a_turn_sees_agents_md(admin: Admin, repo: Path) -> None:
    bid, commit = bundle_id(), git(repo, "rev-parse", "HEAD")

    first = push(admin, repo, "--bundle-id", bid, "--runtime", "codex")
    assert first.returncode == 0, first.stderr
    assert f"registered: {bid}@{commit[:12]}" in first.stdout
    assert "lint:" in first.stdout
    async with admin.client() as ctx:
        rev = await ctx.get_bundle_revision(bid, commit[:12])
    assert rev.source == {"repo": "payments-api", "commit": commit}  # no origin: the dir name
    # Codex's files as committed, the root marker; never the untracked sub/AGENTS.md.
    assert {f["path"]: f["content"] for f in rev.files or []} == {
        "AGENTS.md": AGENTS, ".git/HEAD": ""}

    again = push(admin, repo / "src", "--bundle-id", bid, "--runtime", "codex")  # a subdir
    assert again.returncode == 0, again.stderr
    assert f"unchanged: {bid}@{commit[:12]}" in again.stdout
    assert "nothing registered" in again.stdout

    promoted = push(admin, repo, "--bundle-id", bid, "--runtime", "codex", "--promote")
    assert promoted.returncode == 0, promoted.stderr
    assert "unchanged" in promoted.stdout and f"promoted: {bid}@{commit[:12]}" in promoted.stdout
    async with admin.client() as ctx:
        bundle = await ctx.get_bundle(bid)
        assert [r.revision for r in bundle.revisions] == [commit[:12]]
        assert bundle.channel is not None and bundle.channel.stable == commit[:12]
    async with AsyncCtxgateClient(admin.url, admin.runtime_key) as ctx:
        turn = await ctx.assemble_context(user_id="alice@acme.com", session_id="s-push-1",
                                          query="what must run before a commit?", budget=4000,
                                          workspace={"bundle_id": bid})
    assert "Marker PX-4471" in json.dumps(turn.envelope.messages)
    assert turn.manifest.bundle is not None
    assert turn.manifest.bundle["revision"] == commit[:12], turn.manifest.bundle

    twice = push(admin, repo, "--bundle-id", bid, "--runtime", "codex", "--promote")
    assert twice.returncode == 0 and "already stable" in twice.stdout

    write(repo, {"AGENTS.md": AGENTS + "\nAlso run the linter."})
    git(repo, "commit", "-q", "-am", "more rules")
    new_commit = git(repo, "rev-parse", "HEAD")
    third = push(admin, repo, "--bundle-id", bid, "--runtime", "codex")
    assert third.returncode == 0, third.stderr
    assert f"registered: {bid}@{new_commit[:12]}" in third.stdout
    assert (await files_of(admin, bid, new_commit[:12]))["AGENTS.md"].endswith("the linter.")


async def test_claude_code_rules_and_imports_tracked_only(admin: Admin, repo: Path) -> None:
    bid = bundle_id()
    git(repo, "remote", "add", "origin", "https://bot:s3cr3t-token@git.example.com/acme/p.git")
    done = push(admin, repo, "--bundle-id", bid, "--runtime", "claude-code", "--revision", "r1")
    assert done.returncode == 0, done.stderr
    assert f"registered: {bid}@r1" in done.stdout
    assert await files_of(admin, bid, "r1") == {
        "CLAUDE.md": CLAUDE, "docs/style.md": STYLE, ".claude/rules/x.md": RULE,
        ".git/HEAD": ""}  # CLAUDE.local.md is untracked, AGENTS.md not Claude Code's
    async with admin.client() as ctx:
        rev = await ctx.get_bundle_revision(bid, "r1")
    assert rev.source["repo"] == "https://git.example.com/acme/p.git"  # the token stays home


async def test_canary_and_a_revision_id_taken_by_another_runtime(admin: Admin,
                                                                   tmp_path: Path) -> None:
    bid, root = bundle_id(), tmp_path / "agents-only"
    root.mkdir()
    git(root, "init", "-q")
    write(root, {"AGENTS.md": AGENTS})
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "agents")
    canary = push(admin, root, "--bundle-id", bid, "--runtime", "codex", "--revision", "r1",
                  "--canary-share", "0.25", "--canary-agent", "release-bot")
    assert canary.returncode == 0, canary.stderr
    assert f"canary: {bid}@r1 for share 0.25 and agents release-bot" in canary.stdout
    async with admin.client() as ctx:
        channel = (await ctx.get_bundle(bid)).channel
    assert channel is not None and channel.canary == "r1" and channel.canary_share == 0.25

    # Hermes would send the very same files: another runtime's text, so r1 is taken (409).
    taken = push(admin, root, "--bundle-id", bid, "--runtime", "hermes", "--revision", "r1")
    assert taken.returncode == 1
    assert "409 conflict: revision 'r1' exists with other files or another runtime" in taken.stderr
    assert "registered" not in taken.stdout


def test_checkout_symlinks_non_text_and_global_areas(tmp_path: Path) -> None:
    """Read without a server: a tracked symlink reads as its tracked target, one pointing out
    of the tree and a file that is not UTF-8 are skipped with the reason, a file where a
    bundle keeps a global area is never sent as a repository file."""
    root = tmp_path / "links"
    root.mkdir()
    git(root, "init", "-q")
    write(root, {"AGENTS.md": AGENTS, "managed/CLAUDE.md": "not the managed policy"})
    (root / "CLAUDE.md").symlink_to("AGENTS.md")
    (root / "svc").mkdir()
    (root / "svc/CLAUDE.md").symlink_to("../../outside.md")
    (root / "lib").mkdir()
    (root / "lib/CLAUDE.md").write_bytes(b"caf\xe9 latin-1")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "links")
    co = read_checkout(root / "lib", "claude-code")
    assert co.root == root and co.commit == git(root, "rev-parse", "HEAD")
    assert co.files == {"CLAUDE.md": AGENTS, ROOT_MARKER: ""}
    assert dict(co.skipped) == {
        "managed/CLAUDE.md": "a path the bundle reads as a global area",
        "svc/CLAUDE.md": "a symlink to no tracked file", "lib/CLAUDE.md": "not UTF-8 text"}
    assert co.dirty == () and co.repo == "links"


async def test_uncommitted_changes_refused_unless_allowed(admin: Admin, repo: Path) -> None:
    bid = bundle_id()
    write(repo, {"AGENTS.md": "edited, not committed"})
    refused = push(admin, repo, "--bundle-id", bid, "--runtime", "codex")
    assert refused.returncode == 2
    assert "uncommitted changes to AGENTS.md" in refused.stderr and "--allow-dirty" in \
        refused.stderr
    async with admin.client() as ctx:
        with pytest.raises(NotFoundError):
            await ctx.get_bundle(bid)

    allowed = push(admin, repo, "--bundle-id", bid, "--runtime", "codex", "--allow-dirty")
    assert allowed.returncode == 0, allowed.stderr
    assert "stay out" in allowed.stderr
    commit = git(repo, "rev-parse", "HEAD")
    assert (await files_of(admin, bid, commit[:12]))["AGENTS.md"] == AGENTS  # HEAD's text


async def test_bad_input_exits_2_and_registers_nothing(admin: Admin, repo: Path,
                                                       tmp_path: Path) -> None:
    bid = bundle_id()
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    (plain / "AGENTS.md").write_text(AGENTS)
    empty = tmp_path / "no-commit"
    empty.mkdir()
    git(empty, "init", "-q")
    code = tmp_path / "code-only"
    code.mkdir()
    git(code, "init", "-q")
    write(code, {"README.md": "no instructions here"})
    git(code, "add", ".")
    git(code, "commit", "-q", "-m", "readme")
    cases = {
        "not inside a git work tree": push(admin, plain, "--bundle-id", bid, "--runtime",
                                           "codex"),
        "is not a directory": push(admin, tmp_path / "missing", "--bundle-id", bid,
                                   "--runtime", "codex"),
        "has no commit yet": push(admin, empty, "--bundle-id", bid, "--runtime", "codex"),
        "no codex instruction file": push(admin, code, "--bundle-id", bid, "--runtime",
                                          "codex"),
        "invalid choice": push(admin, repo, "--bundle-id", bid, "--runtime", "claude_cod"),
        "between 0 and 1": push(admin, repo, "--bundle-id", bid, "--runtime", "codex",
                                "--canary-share", "1.5"),
        "CTXGATE_API_KEY is not set": push(admin, repo, "--bundle-id", bid, "--runtime",
                                           "codex", CTXGATE_API_KEY=""),
    }
    for reason, run in cases.items():
        assert run.returncode == 2, (reason, run.stdout, run.stderr)
        assert reason in run.stderr, (reason, run.stderr)
        assert run.stdout == ""
    async with admin.client() as ctx:
        with pytest.raises(NotFoundError):
            await ctx.get_bundle(bid)


async def test_server_down_or_wrong_key_exits_1(admin: Admin, repo: Path) -> None:
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = push(admin, repo, "--bundle-id", "b", "--runtime", "codex",
                CTXGATE_URL=f"http://127.0.0.1:{port}")
    assert down.returncode == 1
    assert f"cannot reach the server at http://127.0.0.1:{port}" in down.stderr

    bid = bundle_id()
    refused = push(admin, repo, "--bundle-id", bid, "--runtime", "codex",
                   CTXGATE_API_KEY=admin.runtime_key)
    assert refused.returncode == 1
    assert "admin key" in refused.stderr
    bogus = push(admin, repo, "--bundle-id", bid, "--runtime", "codex",
                 CTXGATE_API_KEY="cgk_not-a-key")
    assert bogus.returncode == 1 and "401" in bogus.stderr
    async with admin.client() as ctx:
        with pytest.raises(NotFoundError):
            await ctx.get_bundle(bid)

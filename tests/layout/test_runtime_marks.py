"""Which container tests CI runs a second time under gVisor (issue 33, item 6).

``.ci/run`` runs tests/containers once with the daemon's default runtime,
then only the tests marked ``runtime_sensitive`` again with every container
under ``runsc`` (``REFEREE_TEST_RUNTIME=runsc``): those whose result can
differ there (the sandbox and its limits, the socket folder, a container's
output, the admission check and its games, the build's compile step). A
container test file that starts containers under the session's runtime
(``ContainerBot``, the service's upload pipeline) carries that mark, on the
module or on its tests, or is listed in RUNTIME_INDEPENDENT with the reason
its result cannot depend on the runtime: a new file has to choose.
"""

from __future__ import annotations

import ast
from pathlib import Path

CONTAINERS = Path(__file__).resolve().parents[1] / "containers"

#: What makes a test file start containers under the session's runtime.
STARTS_CONTAINERS = frozenset({"ContainerBot", "service_client", "upload_settled", "Background"})

#: Container test files that are not run again under runsc, and why.
RUNTIME_INDEPENDENT = {
    "test_admin_team_view.py": "the admin's page of a submission: the upload is the set-up, its admission under runsc is test_service_uploads'",
    "test_archive_bombs.py": "archives counted and refused before the daemon loads them (its one container test is marked)",
    "test_builds.py": "images built and loaded: what the daemon stores; the compile step's runtime is test_daemon_work's and test_build_sandbox's",
    "test_daemon_work.py": "what the daemon does with an upload (its healthcheck test is marked); the compile step test sets runsc itself",
    "test_docs_building_an_image.py": "the docs' build commands run as written: the image, not the runtime",
    "test_gvisor.py": "every test chooses its runtime itself (runsc, or a runtime the daemon lacks): the first pass runs them under runsc already",
    "test_instances.py": "two installs' image and container names on one daemon",
    "test_practice_container.py": "sets runsc itself (as serve --runtime runsc): the first pass runs it under gVisor already",
    "test_service_faults.py": "the service's Docker client pointed at a dead socket: no container starts",
    "test_service_storage.py": "images pruned and counted against a quota: the daemon's storage",
    "test_service_stops.py": "a referee serve subprocess, which never sees REFEREE_TEST_RUNTIME: the same run in both passes",
    "test_student_story_browser.py": "the student's pages in a browser; the sandbox it uses is marked in test_service_uploads",
    "test_teacher_story_browser.py": "a referee serve subprocess, which never sees REFEREE_TEST_RUNTIME: the same run in both passes",
    "test_compose.py": "docker/'s compose files: the service's own containers, started by compose with the daemon's default",
}


def _names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)
    }


def _marked(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.Attribute) and n.attr == "runtime_sensitive"
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
    )


def test_each_container_test_file_is_marked_or_says_why_not() -> None:
    unchosen, both = [], []
    for path in sorted(CONTAINERS.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        starts = bool(STARTS_CONTAINERS & _names(tree))
        marked = _marked(tree)
        listed = path.name in RUNTIME_INDEPENDENT
        if starts and not marked and not listed:
            unchosen.append(path.name)
        if marked and listed and "is marked" not in RUNTIME_INDEPENDENT[path.name]:
            both.append(path.name)
    assert not unchosen, (
        f"{unchosen} start containers: mark their runtime-dependent tests "
        "@pytest.mark.runtime_sensitive, or list the file in RUNTIME_INDEPENDENT with the reason"
    )
    assert not both, f"{both} are marked and listed as runtime-independent: say which"


def test_the_list_names_only_files_that_exist() -> None:
    gone = [name for name in RUNTIME_INDEPENDENT if not (CONTAINERS / name).exists()]
    assert not gone, f"RUNTIME_INDEPENDENT names files that are gone: {gone}"

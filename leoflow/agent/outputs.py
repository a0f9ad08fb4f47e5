"""A try's inputs and output on disk: the scratch directory the agent gives a command.

The command finds each direct upstream's output (JSON text) in
``$LEOFLOW_INPUTS_DIR/<task>.json`` and, when small enough, in ``LEOFLOW_INPUT_<TASK>``;
it may write one JSON value to ``$LEOFLOW_OUTPUT``. Everything lives under ``TMPDIR``
(else ``/tmp``, an emptyDir under a read-only root filesystem) and is removed when the
try ends. A try's inputs get a directory of their own (made ahead and removed on a
thread: ``scratch``); its output goes to a fresh name in the process's own private
directory. A try run as a task user instead gets one directory that user owns, with
the output in it and the inputs in its ``inputs``.

Stdlib only: the agent and Lite's subprocess executor share it. The scheduler checks
the output again (``leoflow.domain.outputs``); this check gives the command's own
log the same sentence early.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Mapping

from leoflow.agent import held_dirs
from leoflow.agent.environment import TaskUser
from leoflow.agent.scratch import INPUTS, SCRATCH, remove_tree

# An input is also an environment variable when it is this small, and while all the
# inputs in the environment stay under the second figure: a process's environment
# and argv share ARG_MAX (2 MB on a default Linux stack), one string at most 128 KB.
ENV_INPUT_LIMIT = 64 * 1024
ENV_INPUTS_TOTAL = 256 * 1024


def input_env_name(task_id: str) -> str:
    """``LEOFLOW_INPUT_`` + the task id, ASCII letters upper-cased, anything but a
    letter or digit ``_`` (the rule ``leoflow.domain.outputs`` states)."""
    return "LEOFLOW_INPUT_" + "".join(
        c.upper() if c.isascii() and c.isalnum() else "_" for c in task_id
    )


def scratch_base() -> str:
    """Where tries' directories go: ``LEOFLOW_SCRATCH_DIR`` (Lite gives its pool agent a
    private one, removed whole when the agent ends, killed or not), else ``TMPDIR``,
    else ``/tmp``."""
    return os.environ.get("LEOFLOW_SCRATCH_DIR") or held_dirs.tmpdir()


class TaskFiles:
    """One try's scratch directory; ``prepare`` makes it, ``take_output`` reads the
    output back, ``remove`` deletes it."""

    def __init__(
        self,
        inputs: Mapping[str, str],
        output_limit: int,
        user: TaskUser | None = None,
        *,
        base: str = "",
    ) -> None:
        """``base``: where the directory goes; "" for ``scratch_base()``."""
        self.inputs = dict(inputs)
        self.output_limit = output_limit
        self.user = user
        self.base = base
        self.root = ""  # the try's own directory, where it has one
        self.output_path = ""
        self._made: list[str] = []  # the files prepare wrote in root

    def prepare(self) -> dict[str, str]:
        """Make the directory and the input files; the variables for the command."""
        base = self.base or scratch_base()
        owned = self.user is not None and os.geteuid() == 0
        inputs_dir = ""
        if owned:
            # A directory the task's user must own, output and all (chowned below).
            self.root = SCRATCH.take(base, inputs=bool(self.inputs))
            self.output_path = os.path.join(self.root, "output.json")
            inputs_dir = os.path.join(self.root, INPUTS) if self.inputs else ""
        else:
            if self.inputs:
                # The inputs are the directory: one mkdir and one rmdir a try, where a
                # directory with an ``inputs`` one in it cost two of each (~0.1 ms of
                # CPU a directory here, more while the store's commits use the journal).
                self.root = inputs_dir = SCRATCH.take(base)
            if self.output_limit > 0:
                self.output_path = SCRATCH.output_path(base)
        env: dict[str, str] = {}
        if self.output_limit > 0:
            env["LEOFLOW_OUTPUT"] = self.output_path
        if inputs_dir:
            env["LEOFLOW_INPUTS_DIR"] = inputs_dir
            budget = ENV_INPUTS_TOTAL
            for task_id, text in sorted(self.inputs.items()):
                if os.sep in task_id or task_id in ("", ".", ".."):
                    continue  # never a path outside the directory
                path = os.path.join(inputs_dir, f"{task_id}.json")
                # A new file, never one that stands there: a link would have us write
                # elsewhere, a FIFO would block the agent's loop until read. Either is
                # an OSError, and the try fails at setup saying so.
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
                data = text.encode("utf-8")
                try:  # os.write, not a file object: a try may have many of these
                    rest = memoryview(data)
                    while rest:
                        rest = rest[os.write(fd, rest) :]
                finally:
                    os.close(fd)
                if not owned:  # removed one by one (see scratch.remove_tree)
                    self._made.append(path)
                size = len(data)
                if size <= ENV_INPUT_LIMIT and size <= budget:
                    env[input_env_name(task_id)] = text
                    budget -= size
        if owned:
            assert self.user is not None
            for path in _tree(self.root):
                os.chown(path, self.user.uid, self.user.gid)
        return env

    def take_output(self) -> tuple[str | None, str]:
        """(the output's JSON text or None when the command wrote none, why it cannot be
        taken or ""). A symbolic link or anything but a regular file is refused: the
        agent may read what the command's user cannot."""
        if not self.output_path or self.output_limit <= 0:
            return None, ""
        try:
            fd = os.open(self.output_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None, ""
        except OSError as exc:
            return None, f"the output file $LEOFLOW_OUTPUT could not be read: {exc.strerror}"
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None, "the output $LEOFLOW_OUTPUT is not a regular file"
            data = handle.read(self.output_limit + 1)
        limit = self.output_limit
        if len(data) > limit:
            return None, f"the output is over the limit of {limit} bytes ({limit // 1024} KB)"
        try:
            text = data.decode("utf-8")
            json.loads(text)
        except ValueError as exc:
            return None, f"the output is not valid JSON: {exc}"
        except RecursionError:
            return None, "the output is nested too deeply to read as JSON"
        return text, ""

    def remove(self, *, later: bool = False) -> None:
        """Delete the directory now, or ``later`` on the scratch thread (off the loop),
        and an output file of the shared directory at once (an unlink, usually of
        nothing)."""
        in_root = bool(self.root) and os.path.dirname(self.output_path) == self.root
        if self.output_path and not in_root:
            with contextlib.suppress(OSError):
                os.unlink(self.output_path)
        if self.root and later:
            SCRATCH.discard(self.root, self._made)
        elif self.root:
            remove_tree(self.root, self._made)


def _tree(root: str) -> list[str]:
    paths = [root]
    for parent, dirs, files in os.walk(root):
        paths.extend(os.path.join(parent, name) for name in [*dirs, *files])
    return paths

"""`raytpu train` / `raytpu submit` flags: clear one-line errors, exit 2; the dry run."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from raytpu.cli.app import app
from raytpu.cli.workloads import TRAINER_FLAGS
from raytpu.spec.training import LaunchOptions, TrainConfig, from_argv, to_argv
from typer.testing import CliRunner

runner = CliRunner()


def _run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--tpu", "v9-8"], "--tpu: 'v9-8' is not a TPU accelerator type; valid: v4-8"),
        (["--tpu", "v4-12"], "--tpu: 'v4-12' is not a TPU v4 accelerator type"),
        (["--steps", "0"], "--steps: 0 must be positive"),
        (["--steps", "-3"], "--steps: -3 must be positive"),
        (["--data", "/nonexistent/corpus"], "--data: '/nonexistent/corpus' does not exist"),
        (["--d-model", "100", "--n-heads", "3"], "--d-model: 100 is not a multiple of --n-heads 3"),
        (["--steps", "10", "--fail-host-at-step", "10"], "--fail-host-at-step: 10 must be in 1..9"),
        (["--checkpoint-every", "0"], "--checkpoint-every: 0 must be positive"),
        (["--model", "9b"], "--model: '9b' is not a model preset; valid: byte, tiny, small, 1b"),
        (["--framework", "mxnet"], "--framework: 'mxnet' is not one of torch, jax"),
        (["--framework", "jax"], "--framework jax: trains the Llama presets; add --model"),
        (["--framework", "jax", "--model", "tiny", "--batch-per-host", "6"],
         "--batch-per-host: 6 is not a multiple of the 4 chips per host of v4-16"),
        (["--model", "tiny", "--tokenizer", "vocab.txt"], "--tokenizer: 'vocab.txt' is not a"),
        (["--model", "tiny", "--tokenizer", "/none/t.json"], "--tokenizer: '/none/t.json' does "
                                                             "not exist"),
    ],
)
def test_bad_train_flags_exit_2_with_one_line(args: list[str], needle: str) -> None:
    code, out, err = _run("train", "--local", *args)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err + out
    assert all(line.startswith("error: ") for line in err.strip().splitlines())


def test_every_problem_is_reported() -> None:
    code, _, err = _run("train", "--local", "--tpu", "v9-8", "--steps", "0")
    assert code == 2
    assert len(err.strip().splitlines()) == 2


def test_train_without_local_points_to_submit() -> None:
    code, _, err = _run("train", "--steps", "5")
    assert code == 2
    assert "--local" in err and "raytpu submit --stack" in err


def test_commands_import_no_heavy_modules() -> None:
    code = (
        "import sys, raytpu.cli.app; "
        "print([m for m in ('torch', 'torch_xla', 'ray', 'numpy') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_launcher_command_line_round_trips() -> None:
    cfg = TrainConfig(tpu="v5litepod-16", slices=2, steps=77, data="gs://b/corpus", seed=3,
                      checkpoint_every=7, log_every=5, compile=True)
    opts = LaunchOptions(storage_path="gs://bucket/runs", run_name="r1", max_failures=5,
                         progress=False)
    assert from_argv(to_argv(cfg, opts)) == (cfg, opts)
    plain = TrainConfig()  # compile=None: the platform's default, said by neither flag
    assert not {"--compile", "--no-compile"} & set(to_argv(plain, opts))
    assert from_argv(to_argv(plain, opts))[0] == plain
    lazy = TrainConfig(compile=False)
    assert "--no-compile" in to_argv(lazy, opts)
    assert from_argv(to_argv(lazy, opts))[0] == lazy


def _stack(tmp_path: Path, slices: list[dict[str, object]], auth: str = "token") -> Path:
    d = tmp_path / "stacks"
    d.mkdir()
    config = {
        "gcp:project": "proj-1",
        "raytpu:zone": "us-central2-b",
        "raytpu:slices": slices,
        "raytpu:ray": {"clusterName": "rc-test", "namespace": "ray-ns", "auth": auth},
        "raytpu:storage": {"bucket": "ckpt-bucket"},
    }
    (d / "Pulumi.t1.yaml").write_text(yaml.safe_dump({"config": config}))
    return d


def test_submit_dry_run_prints_the_submission(tmp_path: Path) -> None:
    stacks = _stack(tmp_path, [{"name": "v4", "tpu": "v4-16", "count": 2}])
    code, out, err = _run("submit", "--stack", "t1", "--stacks-dir", str(stacks), "--dry-run",
                          "--steps", "300", "--data", "gs://corpus/text", "--run-name", "exp1")
    assert code == 0, err
    sub = json.loads(out)
    argv = shlex.split(sub["entrypoint"])
    assert argv[:3] == ["python", "-m", "raytpu.workloads.launcher"]
    cfg, opts = from_argv(argv[3:])
    assert (cfg.tpu, cfg.slices, cfg.steps, cfg.data) == ("v4-16", 2, 300, "gs://corpus/text")
    assert opts.storage_path == "gs://ckpt-bucket/runs" and opts.run_name == "exp1"
    assert sub["runtime_env"]["env_vars"]["PJRT_DEVICE"] == "TPU"
    assert sub["address"] == "http://127.0.0.1:8265"
    assert "kubectl port-forward svc/rc-test-head-svc 8265:8265 -n ray-ns" in err


def test_submit_carries_every_trainer_flag(tmp_path: Path) -> None:
    # One non-default value per shared trainer flag: each must reach the job's launcher.
    stacks = _stack(tmp_path, [{"name": "v4", "tpu": "v4-16"}])
    flags = ["--steps", "77", "--data", "gs://c/t", "--checkpoint-every", "7",
             "--batch-per-host", "12", "--n-layers", "5", "--d-model", "96", "--n-heads", "6",
             "--seq-len", "64", "--lr", "0.0007", "--warmup-steps", "4", "--seed", "9",
             "--compile", "--log-every", "2", "--model", "small", "--no-fsdp", "--remat",
             "--tokenizer", "gs://c/tokenizer.json", "--framework", "jax"]
    assert {f.lstrip("-").removeprefix("no-").replace("-", "_")
            for f in flags if f.startswith("--")} == {
        p.name for p in TRAINER_FLAGS} | {"log_every"}
    code, out, err = _run("submit", "--stack", "t1", "--stacks-dir", str(stacks), "--dry-run",
                          *flags)
    assert code == 0, err
    cfg, _ = from_argv(shlex.split(json.loads(out)["entrypoint"])[3:])
    m, o = cfg.model, cfg.optim
    assert (cfg.steps, cfg.data, cfg.checkpoint_every, cfg.batch_per_host, cfg.seed,
            cfg.compile, cfg.log_every) == (77, "gs://c/t", 7, 12, 9, True, 2)
    assert (m.n_layers, m.d_model, m.n_heads, m.seq_len) == (5, 96, 6, 64)
    assert (o.lr, o.warmup_steps) == (0.0007, 4)
    assert (cfg.preset, cfg.fsdp, cfg.remat, cfg.tokenizer, cfg.framework) == (
        "small", False, True, "gs://c/tokenizer.json", "jax")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--stack", "nope"], "--stack: 'nope' has no"),
        (["--stack", "t1", "--slices", "3"], "--slices: 3 is outside 1..2"),
        (["--stack", "t1", "--slice-group", "v5"], "--slice-group: 'v5' is not a slice"),
        (["--stack", "t1", "--steps", "0"], "--steps: 0 must be positive"),
    ],
)
def test_submit_bad_flags(tmp_path: Path, args: list[str], needle: str) -> None:
    stacks = _stack(tmp_path, [{"name": "v4", "tpu": "v4-16", "count": 2}])
    code, _, err = _run("submit", "--stacks-dir", str(stacks), "--dry-run", *args)
    assert code == 2
    assert needle in err and "Traceback" not in err


def test_submit_to_the_shared_cluster_is_bounded_by_its_max_replicas_not_the_pools() -> None:
    """prod's v5e-16 has 6 pools, 4 held by the teams' quotas: the shared RayCluster's group
    may hold 2, so a third slice would wait for pools only team jobs can use."""
    prod = ["--stack", "prod", "--slice-group", "v5e-16", "--dry-run"]
    code, out, err = _run("submit", *prod, "--slices", "2")
    assert code == 0, err
    assert json.loads(out)["metadata"]["slices"] == "2"
    code, _, err = _run("submit", *prod, "--slices", "3")
    assert code == 2
    assert ("--slices: 3 is outside 1..2 (the shared RayCluster's maxReplicas for 'v5e-16': "
            "its 6 pools less the teams' nominal quotas and the raytpu:jobs clusters; more "
            "runs with --team)") in err
    # A team's RayJob brings its own cluster: its quota and borrowing bound it (vision 2 + 2).
    code, out, err = _run("submit", *prod, "--team", "vision", "--slices", "3")
    assert code == 0, err


def test_submit_trains_on_resident_hosts_where_the_stack_keeps_its_gcs_in_redis() -> None:
    """prod's RayCluster has GCS fault tolerance: a run resubmitted after a lost head takes
    its hosts over, so submissions to it are --resident unless told otherwise; dev's is not."""
    def resident(*args: str) -> tuple[bool, bool]:
        code, out, err = _run("submit", "--dry-run", *args)
        assert code == 0, err
        sub = json.loads(out)
        return sub["resident"], from_argv(shlex.split(sub["entrypoint"])[3:])[1].resident

    assert resident("--stack", "prod") == (True, True)
    assert resident("--stack", "prod", "--no-resident") == (False, False)
    assert resident("--stack", "dev") == (False, False)
    assert resident("--stack", "dev", "--resident") == (True, True)
    # A team's RayJob (a retry deletes its cluster) and a user's command are refused by name.
    for extra in (["--team", "vision"], ["--", "python", "train.py"]):
        code, _, err = _run("submit", "--stack", "prod", "--dry-run", "--resident", *extra)
        assert code == 2 and err.startswith("error: --resident: "), err
    # Unasked, a team job is simply not resident.
    code, out, err = _run("submit", "--stack", "prod", "--team", "vision", "--dry-run")
    assert code == 0 and "--resident" not in out, err


def test_submit_reports_an_invalid_stack(tmp_path: Path) -> None:
    stacks = _stack(tmp_path, [{"name": "v4", "tpu": "v9-16", "count": 1}])
    code, _, err = _run("submit", "--stack", "t1", "--stacks-dir", str(stacks), "--dry-run")
    assert code == 2
    assert "raytpu:slices[0].tpu" in err


@pytest.mark.parametrize("auth", ["token", "disabled"])
def test_submit_unreachable_cluster_is_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, auth: str
) -> None:
    pytest.importorskip("ray")
    stacks = _stack(tmp_path, [{"name": "v4", "tpu": "v4-16", "count": 1}], auth=auth)
    monkeypatch.setenv("RAY_AUTH_TOKEN", "t0k3n")
    code, _, err = _run("submit", "--stack", "t1", "--stacks-dir", str(stacks),
                        "--address", "http://127.0.0.1:9")
    assert code == 1
    assert "cannot submit to http://127.0.0.1:9" in err and "kubectl port-forward" in err


def test_submit_to_a_token_cluster_without_the_token_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray")
    for var in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    stacks = _stack(tmp_path, [{"name": "v4", "tpu": "v4-16"}])
    code, _, err = _run("submit", "--stack", "t1", "--stacks-dir", str(stacks))
    assert code == 1
    assert "raytpu:ray.auth: token" in err
    assert ("export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=$(kubectl -n ray-ns get secret rc-test "
            "-o jsonpath='{.data.auth_token}' | base64 -d)") in err
    code, out, _ = _run("submit", "--stack", "t1", "--stacks-dir", str(stacks), "--dry-run")
    assert code == 0 and json.loads(out)["auth"] == "token"


def test_data_that_is_not_training_data_exits_2_naming_it(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "model.bin").write_bytes(b"\x80\x04\x95\x00\x00" * 50)  # a pickle, say
    (tmp_path / "shards").mkdir()
    np = pytest.importorskip("numpy")  # the data checks read files: the workloads extra
    np.save(tmp_path / "shards" / "a.npy", np.arange(10, dtype=np.int32))
    (tmp_path / "t.json").write_text("{}")
    cases = [
        (["--data", str(tmp_path / "empty")],
         f"--data: '{tmp_path / 'empty'}' holds no text files and no token shards; expected "
         "a text file, a .npy token shard"),
        (["--data", str(tmp_path / "model.bin")],
         f"--data: '{tmp_path / 'model.bin'}' is neither text (it has NUL bytes) nor a .npy "
         "token shard; expected"),
        (["--model", "tiny", "--data", str(tmp_path / "shards"), "--tokenizer",
          str(tmp_path / "t.json")],
         f"--data: '{tmp_path / 'shards'}' holds pre-tokenized .npy shards, and --tokenizer "
         f"{tmp_path / 't.json'} would not be used"),
    ]
    for args, needle in cases:
        code, out, err = _run("train", "--local", *args)
        assert code == 2, (args, out, err)
        assert needle in " ".join(err.split()), err
        assert "Traceback" not in err + out


def test_the_default_checkpoint_dir_is_ignored_by_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local run in a user's checkout leaves no untracked files; in this repository the
    folder is ignored too, for ones made before it ignored itself."""
    from raytpu.cli import local_runs
    from raytpu.workloads import local_mode

    seen: list[LaunchOptions] = []

    def fake_run(cfg: TrainConfig, opts: LaunchOptions) -> local_mode.LocalRunReport:
        seen.append(opts)
        return local_mode.LocalRunReport(records=[], attempts=1, last_step=cfg.steps, wall_s=0)

    monkeypatch.setattr(local_mode, "run_local", fake_run)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    code, _, err = _run("train", "--local", "--steps", "2")
    assert code == 0, err
    assert seen[0].storage_path == str(tmp_path / local_runs.DEFAULT)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            capture_output=True, text=True, check=True, cwd=tmp_path)
    assert status.stdout == ""
    repo = Path(__file__).resolve().parents[2]
    assert subprocess.run(["git", "check-ignore", "-q", str(local_runs.DEFAULT)],
                          cwd=repo).returncode == 0


def test_a_checkpoint_dir_that_is_a_file_exits_2(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    code, _, err = _run("train", "--local", "--steps", "2", "--checkpoint-dir",
                        str(tmp_path / "f"))
    assert code == 2
    assert f"--checkpoint-dir: '{tmp_path / 'f'}' is not a folder" in err


def test_local_data_paths_reach_the_hosts_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from raytpu.spec.train_options import build_config, trainer_defaults

    (tmp_path / "big.txt").write_text("text\n" * 100)
    (tmp_path / "t.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    base = {**trainer_defaults(), "tpu": "v4-16", "slices": 1, "data": "big.txt"}
    cfg = build_config(**{**base, "tokenizer": "t.json"})
    assert (cfg.data, cfg.tokenizer) == (str(tmp_path / "big.txt"), str(tmp_path / "t.json"))
    cluster = build_config(**base, check_data=False)
    assert cluster.data == "big.txt"  # submit: a path on the cluster, left as given


def test_bad_flags_exit_2_and_a_refusal_exit_1_each_with_its_error_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The one place ``train``, ``submit`` and ``run`` turn an expected error into an exit."""
    import typer
    from raytpu.cli.exits import bad_flags_or_refused
    from raytpu.spec.train_options import BadFlags

    class Refused(Exception):
        pass

    with pytest.raises(typer.Exit) as e, bad_flags_or_refused(Refused):
        raise BadFlags(["--a: one", "--b: two"])
    assert e.value.exit_code == 2
    assert capsys.readouterr().err == "error: --a: one\nerror: --b: two\n"
    with pytest.raises(typer.Exit) as e, bad_flags_or_refused(Refused):
        raise Refused("the cluster said no")
    assert e.value.exit_code == 1
    assert capsys.readouterr().err == "error: the cluster said no\n"
    with pytest.raises(KeyError), bad_flags_or_refused(Refused):
        raise KeyError("anything else is not an expected error")

"""tilegrad.torch.checkpoint: save writes whole files only (an interrupted or refused save leaves the
previous file as it was) and refuses non-finite state; load reads with weights_only=True and answers
a missing, empty, damaged, pickled or foreign file with one ValueError naming the file and why. The
training example's resume relies on both (tests/test_train_lm.py runs it end to end)."""

import os

import pytest

torch = pytest.importorskip("torch")
from tilegrad.torch import checkpoint  # noqa: E402


def model_and_optimizer_state():
    """A real training state: a linear layer and tilegrad's AdamW after one step."""
    import tilegrad.torch as tgt
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = tgt.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.randn(5, 4)).square().mean().backward()
    opt.step()
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 1, "args": {"lr": 1e-2}}


def test_save_then_load_gives_back_the_same_state(tmp_path):
    state = model_and_optimizer_state()
    checkpoint.save(state, tmp_path / "ckpt.pt")
    loaded = checkpoint.load(tmp_path / "ckpt.pt", required=("model", "optimizer", "step"))
    assert loaded["step"] == 1 and loaded["args"] == {"lr": 1e-2}
    for key, tensor in state["model"].items():
        assert torch.equal(loaded["model"][key], tensor)
    assert torch.equal(loaded["optimizer"]["state"][0]["exp_avg"], state["optimizer"]["state"][0]["exp_avg"])
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temporary file left behind


@pytest.mark.parametrize("where", ["model", "optimizer"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_state_is_refused_and_the_previous_file_kept(tmp_path, where, bad):
    good = model_and_optimizer_state()
    file = tmp_path / "ckpt.pt"
    checkpoint.save(good, file)
    before = file.read_bytes()
    broken = model_and_optimizer_state()
    tensor = broken["model"]["weight"] if where == "model" else broken["optimizer"]["state"][0]["exp_avg_sq"]
    tensor[1, 2] = bad
    key = "model.weight" if where == "model" else "optimizer.state.0.exp_avg_sq"
    with pytest.raises(ValueError, match=rf"tilegrad\.torch\.checkpoint\.save: state\['{key}'\] holds non-finite"):
        checkpoint.save(broken, file)
    assert file.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]


def test_integer_and_bfloat16_tensors_are_checked_as_they_are(tmp_path):
    """Integer tensors cannot be non-finite; a bfloat16 infinity is caught like a float32 one."""
    checkpoint.save({"ids": torch.arange(5), "w": torch.ones(3, dtype=torch.bfloat16)}, tmp_path / "a.pt")
    with pytest.raises(ValueError, match=r"state\['w'\]"):
        checkpoint.save({"w": torch.tensor([1.0, float("inf")], dtype=torch.bfloat16)}, tmp_path / "b.pt")
    assert not (tmp_path / "b.pt").exists()


def test_a_save_interrupted_while_writing_leaves_the_previous_file(tmp_path, monkeypatch):
    file = tmp_path / "ckpt.pt"
    checkpoint.save({"step": 1}, file)
    before = file.read_bytes()

    def fail_half_way(obj, path):
        open(path, "wb").write(b"half a chec")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", fail_half_way)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save({"step": 2}, file)
    assert file.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]


def test_save_refuses_a_state_that_is_not_a_dict(tmp_path):
    with pytest.raises(TypeError, match=r"tilegrad\.torch\.checkpoint\.save: state must be a dict, got list"):
        checkpoint.save([torch.ones(2)], tmp_path / "ckpt.pt")


class Payload:
    """An arbitrary object: torch.load(weights_only=True) must refuse to rebuild it."""

    def __reduce__(self):
        return (os.getcwd, ())


@pytest.mark.parametrize("contents, why", [
    (None, "does not exist"),
    (b"", "cannot be read (an empty file)"),
    (b"\x80\x02garbage that is no zip archive", "cannot be read (torch.load failed with"),
    ("truncated", "cannot be read (torch.load failed with"),
    ("pickled object", "cannot be read (torch.load failed with"),
    ("foreign", "is not the checkpoint expected (no 'model', 'step')"),
    ("list", "is not the checkpoint expected (no 'model', 'step')"),
])
def test_load_names_the_file_and_what_is_wrong(tmp_path, contents, why):
    file = tmp_path / "ckpt.pt"
    if contents == "truncated":
        torch.save({"model": {"w": torch.ones(1000)}, "step": 3}, file)
        file.write_bytes(file.read_bytes()[:-200])
    elif contents == "pickled object":
        torch.save({"model": Payload(), "step": 3}, file)
    elif contents == "foreign":
        torch.save({"weights": torch.ones(3)}, file)
    elif contents == "list":
        torch.save([torch.ones(3)], file)
    elif contents is not None:
        file.write_bytes(contents)
    with pytest.raises(ValueError) as info:
        checkpoint.load(file, required=("model", "step"))
    message = str(info.value)
    assert message.startswith(f"tilegrad.torch.checkpoint.load: {file} {why}"), message
    assert "weights_only" not in message and "\n" not in message  # never the advice to unpickle it


def test_load_puts_tensors_on_the_cpu_and_needs_no_keys_by_default(tmp_path):
    checkpoint.save({"w": torch.ones(2, 3)}, tmp_path / "ckpt.pt")
    loaded = checkpoint.load(str(tmp_path / "ckpt.pt"))
    assert loaded["w"].device.type == "cpu" and torch.equal(loaded["w"], torch.ones(2, 3))

import pytest

from fitness.check.lint import lint

HEADER = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef _k(y_ptr):\n    tl.store(y_ptr, 1.0)\n\n\n"


def body(launch: str, extra: str = "") -> str:
    return HEADER + extra + "PARAMS = {}\n\n\ndef launch(x, y):\n" + launch + "    _k[(1,)](y)\n"


def test_a_plain_candidate_passes():
    assert lint(body("    n = x.numel()\n")).ok


@pytest.mark.parametrize(
    "source, words",
    [
        (body("    y.copy_(torch.softmax(x, 1))\n", "import torch\n"), "torch.softmax"),
        (body("    y.copy_(getattr(torch, 'softmax')(x, 1))\n", "import torch\n"), "getattr"),
        (body("    f = torch\n", "import torch\n"), "may only be used"),
        (body("    pass\n", "from torch import softmax\n"), "import of 'torch.softmax'"),
        (body("    pass\n", "import torch.nn.functional as F\n"), "import of 'torch.nn.functional'"),
        (body("    try:\n        pass\n    except Exception:\n        pass\n"), "try/except"),
        (body("    __import__('os')\n"), "__import__"),
        (body("    x.__class__\n"), "private attribute"),
        (body("    exec('1')\n"), "'exec'"),
        (body("    vars()\n"), "'vars'"),
        (body("    pass\n", "import os\n"), "import of 'os'"),
        (body("    pass\n", "import numpy as np\n"), "import of 'numpy'"),
        (body("    torch.cuda.Stream()\n", "import torch\n"), "torch.cuda"),
        (body("    triton.testing.do_bench(lambda: 0)\n"), "triton.testing"),
        (body("    global STATE\n"), "global"),
        (body("    pass\n", "class A:\n    pass\n\n\n"), "class"),
        (body("    with open('f') as f:\n        pass\n"), "with"),
        (body("    pass\n", "X = open('/etc/passwd')\n"), "'open'"),
    ],
)
def test_forbidden_constructs_are_named(source, words):
    result = lint(source)
    assert not result.ok
    assert words in result.reason(), result.reason()


TORCH = "import torch\n"
DEVICE_QUERIES = [
    ("    if x.get_device() >= 0:\n        pass\n", "attribute 'get_device'"),
    ("    n = x.type()\n", "attribute 'type'"),
    ("    n = x.data_ptr() % 512\n", "attribute 'data_ptr'"),
    ("    n = x.device.type\n", "attribute 'type'"),
    ("    n = torch.cuda.is_available()\n", "torch.cuda.is_available is not allowed"),
    ("    n = torch.cuda.current_device()\n", "torch.cuda.current_device is not allowed"),
    ("    n = x.device == torch.device('cpu')\n", "torch.device is not allowed"),
    ("    n = x.device == y.device\n", "x.device may only be passed as device="),
    ("    d = x.device\n    n = torch.empty(4, device=d)\n", "device=d: allocate on the inputs' device"),
    ("    n = f'{x.device}'\n", "x.device may only be passed as device="),
    ("    n = name_of(device=x.device)\n", "x.device may only be passed as device="),  # a function of its own
    ("    n = torch.empty(4, device='cpu')\n", "device='cpu': allocate on the inputs' device"),
    ("    n = torch.zeros(4, dtype=torch.float32)\n", "torch.zeros(...) without device="),
    ("    n = torch.empty_strided((4,), (1,))\n", "torch.empty_strided(...) without device="),
    ("    kw = {'device': x.device}\n    n = torch.full((4,), 0.0, **kw)\n", "without device="),
]


@pytest.mark.parametrize("code, words", DEVICE_QUERIES)
def test_launch_cannot_tell_which_device_runs_it(code, words):
    """What the checker ran on the CPU must be what runs on the GPU: no branch on the device's kind, no
    buffer left on the host."""
    helper = "def name_of(device):\n    return f'{device}'\n\n\n"
    result = lint(body(code, TORCH + helper))
    assert not result.ok and words in result.reason(), result.reason()


def test_names_imported_by_name_and_module_level_allocations_need_a_device_too():
    assert "E(...) without device=" in lint(body("    n = E(4)\n", "from torch import empty as E\n")).reason()
    module_level = body("    pass\n", TORCH + "BUF = torch.ones(4)\n")
    assert "torch.ones(...) without device=" in lint(module_level).reason()


def test_allocations_on_the_inputs_device_pass():
    code = ("    a = torch.empty(4, dtype=torch.float32, device=x.device)\n"
            "    b = torch.empty_like(x)\n    c = x.new_zeros(3)\n    d = torch.zeros_like(y, device=y.device)\n"
            "    e = torch.empty_strided((2, 2), (2, 1), device=x.device)\n"
            "    f = torch.full((2,), 1.0, device=torch.empty_like(x).device)\n")
    assert lint(body(code, TORCH)).ok, lint(body(code, TORCH)).reason()


def test_the_contract_structure_is_checked():
    assert "does not define launch" in lint(HEADER).reason()
    assert "no @triton.jit kernel" in lint("PARAMS = {}\n\n\ndef launch(x, y):\n    pass\n").reason()
    assert "never launches" in lint(HEADER + "PARAMS = {}\n\n\ndef launch(x, y):\n    pass\n").reason()
    bad_params = HEADER + 'PARAMS = {"BLOCK": 4}\n\n\ndef launch(x, y):\n    _k[(1,)](y)\n'
    assert "does not accept" in lint(bad_params).reason()
    assert "syntax error" in lint("def launch(:\n").reason()


def test_jit_bodies_cannot_reach_torch():
    src = ("import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\ndef _k(y_ptr):\n"
           "    torch.empty(3)\n\n\nPARAMS = {}\n\n\ndef launch(x, y):\n    _k[(1,)](y)\n")
    assert "inside @triton.jit" in lint(src).reason()


def test_a_kernel_launched_through_a_helper_counts():
    src = HEADER + "PARAMS = {}\n\n\ndef _go(y):\n    _k[(1,)](y)\n\n\ndef launch(x, y):\n    _go(y)\n"
    assert lint(src).ok


@pytest.mark.parametrize("spelling", [
    "from triton.language.extra import libdevice\n",  # Triton's documented spelling
    "from triton.language.extra.cuda import libdevice\n",
    "import triton.language.extra.libdevice as libdevice\n",
])
def test_libdevice_may_be_imported_as_triton_documents_it(spelling):
    source = HEADER.replace("tl.store(y_ptr, 1.0)", "tl.store(y_ptr, libdevice.erf(1.0))")
    source = source.replace("import triton.language as tl\n", "import triton.language as tl\n" + spelling)
    result = lint(source + "PARAMS = {}\n\n\ndef launch(x, y):\n    _k[(1,)](y)\n")
    assert result.ok, result


@pytest.mark.parametrize("spelling, words", [
    ("from triton.language.extra import cuda\n", "import of 'triton.language.extra.cuda'"),
    ("from triton.language import extra\n", "import of 'triton.language.extra'"),
    ("from triton.runtime import interpreter\n", "import of 'triton.runtime.interpreter'"),
])
def test_a_package_above_libdevice_is_not_importable(spelling, words):
    result = lint(HEADER + spelling + "PARAMS = {}\n\n\ndef launch(x, y):\n    _k[(1,)](y)\n")
    assert not result.ok and words in "; ".join(result.problems), result


def test_an_autotuned_kernel_is_told_how_to_hand_its_configs_to_the_search():
    source = HEADER.replace("@triton.jit\n", "@triton.autotune(configs=[], key=[])\n@triton.jit\n")
    result = lint(source + "PARAMS = {}\n\n\ndef launch(x, y):\n    _k[(1,)](y)\n")
    assert not result.ok
    text = "; ".join(result.problems)
    assert "decorator 'triton.autotune' is not allowed" in text and "in SPACE" in text, result


def kernel_with(line: str, extra: str = "") -> str:
    return ("import triton\nimport triton.language as tl\n" + extra + "\n\n@triton.jit\ndef _k(y_ptr, n):\n"
            "    offs = tl.arange(0, 16)\n    y = tl.load(y_ptr + offs)\n" + line
            + "    tl.store(y_ptr + offs, y)\n\n\nPARAMS = {}\n\n\ndef launch(x, y):\n    _k[(1,)](y, 16)\n")


@pytest.mark.parametrize("line, extra", [
    ("    y = tl.where(tl.rand(7, offs) < 1e-7, 0.0, y)\n", ""),  # wrong on one element in ten million
    ("    y = y * (1 - tl.randint(7, offs) // 4294967000).to(tl.float32)\n", ""),  # the same with no comparison
    ("    y = y + tl.randn(n, offs) * 0.0\n", ""),
    ("    a, b, c, d = tl.randint4x(7, offs)\n", ""),
    ("    y = y + tl.random.rand(7, offs) * 0.0\n", ""),
    ("    y = y + r(7, offs) * 0.0\n", "from triton.language import rand as r\n"),
])
def test_random_numbers_are_refused(line, extra):
    """A task's reference is deterministic, and a random value is one no input of the check can steer: a kernel
    wrong where `tl.rand` falls below 1e-7 is right at every check size."""
    result = lint(kernel_with(line, extra))
    assert not result.ok
    assert "rand" in result.reason() and "random numbers" in result.reason(), result.reason()


def test_the_kernel_without_random_numbers_passes():
    assert lint(kernel_with("    y = tl.where(offs < n, y, 0.0)\n")).ok, lint(kernel_with("")).reason()

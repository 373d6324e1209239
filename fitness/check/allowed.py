"""The exact allowlist of names a candidate module may use (`fitness.check.lint`).

Every attribute chain rooted at an imported module must reach one of `CHAINS` (a full dotted name,
the module's canonical name first); what follows a listed name, and any attribute taken on a value
(a local, a call's result), must be in `JIT_VALUE_ATTRS` inside ``@triton.jit`` code or in
`HOST_VALUE_ATTRS` in ``launch`` and its helpers. Anything else, at any depth, is a ``lint_error``
naming the chain. The lists are written out rather than read from the installed packages: a new
triton or torch release must not widen the contract by itself.
"""

from __future__ import annotations

# triton.language: the public DSL (left out: inline assembly, block pointers, type internals, and random
# numbers: `RANDOM`)
_TL = """
abs add advance arange argmax argmin associative_scan assume atomic_add atomic_and atomic_cas
atomic_load atomic_max atomic_min atomic_or atomic_poll atomic_store atomic_xchg atomic_xor bfloat16
bitonic_merge broadcast broadcast_to cast cat cdiv ceil clamp constexpr cos cumprod cumsum
debug_barrier device_assert device_print div_rn dot dot_scaled dtype erf exp exp2 expand_dims
fdiv flip float16 float32 float64 float8e4b15 float8e4b8 float8e4nv float8e5 float8e5b16 floor fma
full gather histogram int1 int16 int32 int64 int8 interleave join load load_tensor_descriptor log
log2 make_tensor_descriptor map_elementwise max max_constancy max_contiguous maximum min minimum mul
multiple_of num_programs permute program_id
range ravel reduce reduce_or reshape rsqrt sigmoid sin slice softmax sort
split sqrt sqrt_rn squeeze static_assert static_print static_range store store_tensor_descriptor sub
sum swizzle2d tensor tensor_descriptor topk trans tuple uint16 uint32 uint64 uint8
umulhi unsqueeze view void where xor_sum zeros zeros_like TRITON_MAX_TENSOR_NUMEL PropagateNan.ALL
PropagateNan.NONE
"""
# random numbers: a task's reference is deterministic, so a kernel's output may not depend on them, and a
# value no input holds is one the check cannot steer (`tl.rand(seed, offs) < 1e-7` goes one way at every check
# size and the other somewhere in a user's tensor)
RANDOM = frozenset(f"triton.language.{n}" for n in """
pair_uniform_to_normal philox rand rand4x randint randint4x randn randn4x uint_to_uniform_float
""".split())
_TL_MATH = "abs ceil cos div_rn erf exp exp2 fdiv floor fma log log2 rsqrt sin sqrt sqrt_rn umulhi"
_LIBDEVICE = """
abs acos acosh add_rd add_rn add_ru add_rz asin asinh atan atan2 atanh brev byte_perm cbrt ceil clz
copysign cos cosh cospi cyl_bessel_i0 cyl_bessel_i1 div_rd div_rn div_ru div_rz double2float_rd
double2float_rn double2float_ru double2float_rz double2hiint double2int_rd double2int_rn double2int_ru
double2int_rz double2ll_rd double2ll_rn double2ll_ru double2ll_rz double2loint double2uint_rd
double2uint_rn double2uint_ru double2uint_rz double2ull_rd double2ull_rn double2ull_ru double2ull_rz
double_as_longlong erf erfc erfcinv erfcx erfinv exp exp10 exp2 expm1 fast_cosf fast_dividef
fast_exp10f fast_expf fast_log10f fast_log2f fast_logf fast_powf fast_sinf fast_tanf fast_tanhf fdim
ffs finitef float2int_rd float2int_rn float2int_ru float2int_rz float2ll_rd float2ll_rn float2ll_ru
float2ll_rz float2uint_rd float2uint_rn float2uint_ru float2uint_rz float2ull_rd float2ull_rn
float2ull_ru float2ull_rz float_as_int float_as_uint floor fma fma_rd fma_rn fma_ru fma_rz fmod hadd
hiloint2double hypot ilogb int2double_rn int2float_rd int2float_rn int2float_ru int2float_rz
int_as_float isfinited isinf isnan j0 j1 jn ldexp lgamma ll2double_rd ll2double_rn ll2double_ru
ll2double_rz ll2float_rd ll2float_rn ll2float_ru ll2float_rz llrint llround log log10 log1p log2 logb
longlong_as_double mul24 mul_rd mul_rn mul_ru mul_rz mulhi nearbyint nextafter norm3d norm4d normcdf
normcdfinv popc pow rcbrt rcp64h rcp_rd rcp_rn rcp_ru rcp_rz remainder rhadd rhypot rint rnorm3d
rnorm4d round rsqrt rsqrt_rn sad saturatef scalbn signbit sin sinh sinpi sqrt sqrt_rd sqrt_rn sqrt_ru
sqrt_rz sub_rd sub_rn sub_ru sub_rz tan tanh tgamma trunc uint2double_rn uint2float_rd uint2float_rn
uint2float_ru uint2float_rz uint_as_float ull2double_rd ull2double_rn ull2double_ru ull2double_rz
ull2float_rd ull2float_rn ull2float_ru ull2float_rz y0 y1 yn
"""
_TRITON = "jit cdiv next_power_of_2 heuristics constexpr_function"
_MATH = """
pi e inf nan tau sqrt isqrt log log2 log10 log1p exp exp2 expm1 ceil floor trunc prod gcd lcm fabs
sin cos tan tanh atan atan2 erf erfc isfinite isinf isnan copysign fmod comb factorial hypot
"""
_TORCH = """
empty zeros ones full empty_like zeros_like ones_like full_like empty_strided Tensor Size dtype
float16 float32 float64 bfloat16 half float double int8 int16 int32 int64 uint8 bool long int
float8_e4m3fn float8_e5m2 cuda.get_device_properties cuda.get_device_capability
"""
_TYPING = "Any Optional Union Tuple List Dict Sequence Callable"

LIBDEVICE = "triton.language.extra.libdevice"
# modules a candidate may import, each with its canonical name (what its chains are written from)
MODULES = {
    "triton": "triton", "triton.language": "triton.language", "triton.language.math": "triton.language.math",
    LIBDEVICE: LIBDEVICE, "triton.language.extra.cuda.libdevice": LIBDEVICE,
    "math": "math", "torch": "torch", "typing": "typing", "__future__": "__future__",
}
CHAINS: frozenset[str] = frozenset(
    [f"triton.language.{n}" for n in _TL.split()]
    + [f"triton.language.math.{n}" for n in _TL_MATH.split()]
    + [f"{LIBDEVICE}.{n}" for n in _LIBDEVICE.split()]
    + [f"triton.{n}" for n in _TRITON.split()]
    + [f"math.{n}" for n in _MATH.split()]
    + [f"torch.{n}" for n in _TORCH.split()]
    + [f"typing.{n}" for n in _TYPING.split()]
    + ["__future__.annotations"]
)


def canonical(name: str) -> str:
    """`name` with the CUDA spelling of libdevice's module written as the generic one."""
    cuda = "triton.language.extra.cuda.libdevice"
    return LIBDEVICE + name[len(cuda):] if name == cuda or name.startswith(cuda + ".") else name


# attributes of values inside @triton.jit code: tensor methods, dtype and constexpr queries
JIT_VALUE_ATTRS = frozenset("""
T abs argmax argmin associative_scan atomic_add atomic_and atomic_cas atomic_max atomic_min atomic_or
atomic_xchg atomic_xor broadcast_to cast cdiv ceil cos cumprod cumsum erf exp exp2 expand_dims flip floor
gather histogram log log2 logical_and logical_or max min permute ravel reduce reduce_or reshape rsqrt
sigmoid sin softmax sort split sqrt sqrt_rn store sum to trans view xor_sum dtype shape numel
element_ty primitive_bitwidth scalar value is_bf16 is_fp16 is_fp32 is_fp64 is_fp8 is_floating is_int
is_int_signed is_int_unsigned is_ptr is_block is_bool is_int1 is_int8 is_int16 is_int32 is_int64
is_uint8 is_uint16 is_uint32 is_uint64 with_element_ty get_int_max_value get_int_min_value
""".split())
# attributes of values in launch and its helpers: the torch metadata, view and allocation API the
# run-time guard allows (`fitness.sandbox.torch_guard`), dtype and device-property queries. Nothing that
# tells which kind of device runs the code (is_cuda, get_device, type, torch.cuda.is_available, data_ptr:
# a CUDA allocation is 512-byte aligned, a CPU one is not, so a few allocations tell them apart): a kernel
# checked on the CPU interpreter must take the same path on the GPU (`fitness.check.lint` also confines
# `.device` to allocations' device= keyword)
HOST_VALUE_ATTRS = frozenset("""
size stride dim numel nelement element_size is_contiguous storage_offset
is_floating_point shape dtype device ndim layout itemsize nbytes
view unsqueeze squeeze permute transpose t T mT expand unflatten view_as reshape flatten as_strided
expand_as movedim new_empty new_zeros new_ones new_full new_empty_strided zero_ fill_
is_signed multi_processor_count total_memory name major minor max_shared_memory_per_block_optin
regs_per_multiprocessor max_threads_per_multi_processor warp_size L2_cache_size get items keys values
""".split())
# torch allocations that take no tensor to copy the device from: each must say device=<tensor>.device
# (without it the buffer is on the CPU: right in the interpreter, a host pointer handed to a GPU kernel)
DEVICE_ALLOCATIONS = frozenset(f"torch.{n}" for n in "empty zeros ones full empty_strided".split())
BUILTINS = frozenset("""
range len min max abs int float bool tuple list dict enumerate zip round divmod pow isinstance print
ValueError RuntimeError AssertionError TypeError NotImplementedError True False None
""".split())
JIT_BUILTINS = frozenset("range min max len int float abs print isinstance tuple True False None".split())
# what a module-level value or a parameter's default may call: pure functions of constants that return a
# number, a string or a tl.constexpr. Anything else could hand back a tensor, a container or an iterator,
# an object a call of launch could change and the next call see (`fitness.check.module_state`)
CONSTANT_CALLS = frozenset(
    [f"math.{n}" for n in _MATH.split()]
    + ["triton.cdiv", "triton.next_power_of_2", "triton.language.constexpr", "triton.language.cdiv"]
    + "int float bool abs min max round divmod pow len".split()
)
# methods that change the object they are called on (torch's in-place methods, named with a trailing
# underscore, count too): refused on a module-level object or an alias of one
MUTATING_METHODS = frozenset("""
append extend insert pop remove clear update setdefault popitem add discard sort reverse
difference_update intersection_update symmetric_difference_update
__setitem__ __delitem__ __setattr__ __delattr__ __iadd__ __isub__ __imul__ __ior__ __iand__
""".split())
# listed names that are values, not functions or modules: dtypes and constants, which a module-level
# value or a default may name (a function object there is a second handle on something launch runs)
_TL_DTYPES = """
bfloat16 float16 float32 float64 float8e4b15 float8e4b8 float8e4nv float8e5 float8e5b16 int1 int8 int16
int32 int64 uint8 uint16 uint32 uint64 void TRITON_MAX_TENSOR_NUMEL PropagateNan.ALL PropagateNan.NONE
"""
_TORCH_DTYPES = """
float16 float32 float64 bfloat16 half float double int8 int16 int32 int64 uint8 bool long int
float8_e4m3fn float8_e5m2
"""
CONSTANT_NAMES = frozenset(
    [f"triton.language.{n}" for n in _TL_DTYPES.split()]
    + [f"torch.{n}" for n in _TORCH_DTYPES.split()]
    + [f"math.{n}" for n in "pi e inf nan tau".split()]
)

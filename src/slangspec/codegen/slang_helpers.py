"""The Slang helpers a generated kernel declares before its entry point where it needs them:
slangpy's hash, a warp-summed atomic add, and a tensor whose loads' gradients add once per
warp."""

WANG = "slangspec_wang_hash"
WANG_HASH = f"""uint {WANG}(uint s)
{{
    s = (s ^ 61u) ^ (s >> 16);
    s *= 9u;
    s = s ^ (s >> 4);
    s *= 0x27d4eb2du;
    return s ^ (s >> 15);
}}
"""
"""Thomas Wang's 32-bit hash, which slangpy's ``wang_hash`` and ``rand_float`` use."""
ADD = "slangspec_accumulate"
ACCUMULATE = """void {add}({t}* g, int at, {t} v)
{{
    if (WaveActiveAllTrue(v == {t}(0)))
        return;
    if (WaveActiveAllEqual(at))
    {{
        {t} sum = WaveActiveSum(v);
        if (WaveIsFirstLane())
            InterlockedAdd(g[at], sum);
    }}
    else
        InterlockedAdd(g[at], v);
}}
"""
"""An atomic add of a gradient's part (of scalar ``t``): none where every call of the warp adds
zero (a saturated sigmoid, a field of a struct the call did not use), once per warp where every
call of the warp adds into one element (a parameter every call reads), else once per call."""


def accumulate(scalar: str) -> str:
    """``ACCUMULATE`` for gradients of ``scalar``."""
    return ACCUMULATE.format(add=ADD, t=scalar)


WAVE_TENSOR = "slangspec_WaveDiffTensor"
WAVE_DIFF_TENSOR = f"""public struct {WAVE_TENSOR}<let D : int> : IDiffTensor<float, D>
{{
    public DiffTensor<float, D> t;
    public int copy;

    float _read_primal_each<each I : __BuiltinIntegerType>(expand each I idx)
    {{
        return t._read_primal_each(expand each idx);
    }}
    void _write_grad_each<each I : __BuiltinIntegerType>(float grad, expand each I idx)
    {{
        t._write_grad_each(grad, expand each idx);
    }}
    void _accumulate_grad_each<each I : __BuiltinIntegerType>(float grad, expand each I idx)
    {{
        t._accumulate_grad_each(grad, expand each idx);
    }}
    void _add(int at, float grad)
    {{
        if (WaveActiveAllTrue(grad == 0.0))
            return;
        at += copy;
        if (WaveActiveAllEqual(at))
        {{
            float sum = WaveActiveSum(grad);
            if (WaveIsFirstLane())
                t._grad_out.accumulate_buffer(at, sum);
        }}
        else
            t._grad_out.accumulate_buffer(at, grad);
    }}
    void _load_bwd<I : __BuiltinIntegerType>(I idx[D], float grad)
    {{
        _add(_idx(idx, t._grad_out._strides, t._grad_out._offset), grad);
    }}
    void _load_bwd<I : __BuiltinIntegerType>(vector<I, D> idx, float grad)
    {{
        _add(_idx(idx, t._grad_out._strides, t._grad_out._offset), grad);
    }}
    [BackwardDerivative(_load_bwd)]
    public float load<I : __BuiltinIntegerType>(I idx[D]) {{ return t._primal.load(idx); }}
    [BackwardDerivative(_load_bwd)]
    public float load<I : __BuiltinIntegerType>(vector<I, D> idx) {{ return t._primal.load(idx); }}
    public __subscript<I : __BuiltinIntegerType>(I indices[D])->float
    {{
        [Differentiable] get {{ return load(indices); }}
    }}
    public __subscript<I : __BuiltinIntegerType>(vector<I, D> indices)->float
    {{
        [Differentiable] get {{ return load(indices); }}
    }}
    public property shape : uint[D] {{ get {{ return t.shape; }} }}
}}
"""
"""An ``IDiffTensor<float, D>`` whose loads' gradients add into the tensor's gradient as
``ACCUMULATE`` adds: a whole tensor every call reads (weights a loop walks) takes one atomic
add per warp and element instead of one per call, into the gradient's copy ``copy`` elements
on, which the call's number picks so that fewer warps add into each element."""

# Eager elementwise chains on one GPU against the bytes docs/frameworks.md ("Elementwise
# fusion") and crates/evaluate/src/core/elementwise.rs count. Each chain of a transformer block,
# written as the eager model code runs it (torchtitan 0.1.0's RMSNorm and RoPE, `silu(g) * u`,
# llm-foundry 0.22.0's bf16 LayerNorm, GELU, `x + dropout(b)`), at a Llama-3-8B / MPT-7B shape
# (8192 tokens, h 4096), timed forward and forward + backward, eager and under torch.compile;
# with the GPU's copy bandwidth (bytes read and written) the eager time gives the bytes per
# element the chain moves. Compacted to fit the device tool's command length; run as
#   OUT=results/h100 python3 tools/gpu/elementwise_probe.py
# (results/h100/README.md says what it found). The compiled columns carry each compiled call's
# host-side dispatch, which on the lent VM outlasts these kernels: they are not the fused
# kernels' time, so the extra_* columns (eager minus compiled) are not used.
import torch,torch.nn.functional as F
d="cuda";bf=torch.bfloat16;T,H,FF=8192,4096,14336;QK=40*128
def B(fn,r=30):
 for _ in range(3):fn()
 torch.cuda.synchronize();ts=[]
 for _ in range(r):
  a=torch.cuda.Event(enable_timing=True);b=torch.cuda.Event(enable_timing=True);a.record();fn();b.record();torch.cuda.synchronize();ts.append(a.elapsed_time(b)/1e3)
 ts.sort();return ts[r//2]
x0=torch.empty(T*H*8,dtype=bf,device=d);y0=torch.empty_like(x0);bw=4*x0.numel()/B(lambda:y0.copy_(x0))
def rms(x,w):
 xf=x.float();return (xf*torch.rsqrt(xf.pow(2).mean(-1,keepdim=True)+1e-5)).type_as(x)*w
def rope(q,f):
 c=torch.view_as_complex(q.float().reshape(*q.shape[:-1],-1,2));return torch.view_as_real(c*f).flatten(-2).type_as(q)
X=lambda *s:torch.randn(*s,dtype=bf,device=d,requires_grad=True)
w=torch.ones(H,dtype=bf,device=d,requires_grad=True)
fr=torch.polar(torch.ones(T,1,64,device=d),torch.rand(T,1,64,device=d))
C=[("rmsnorm",rms,(X(T,H),w),H,32,64),("rope",rope,(X(T,40,128),fr),QK,16,16),("swiglu",lambda g,u:F.silu(g)*u,(X(T,FF),X(T,FF)),FF,4,8),("layernorm",lambda x,w:F.layer_norm(x,(H,),w,None,1e-5),(X(T,H),w),H,0,0),("gelu",F.gelu,(X(T,4*H),),4*H,0,0),("residual_add",lambda x,b:x+b,(X(T,H),X(T,H)),H,0,0),("dropout_add",lambda x,b:x+F.dropout(b,0.1,True),(X(T,H),X(T,H)),H,4,0)]
o=open(__import__("os").environ["OUT"]+"/elementwise.csv","w")
o.write("op,elements_per_token,eager_fwd_s,eager_fwdbwd_s,compiled_fwd_s,compiled_fwdbwd_s,copy_bw_Bps,extra_fwd_B_per_elem,extra_bwd_B_per_elem,model_fwd,model_bwd\n")
for nm,fn,a,n,mf,mb in C:
 R=[]
 for f in (fn,torch.compile(fn)):
  g=torch.ones_like(f(*a))
  def st():
   for t in a:
    if isinstance(t,torch.Tensor):t.grad=None
   f(*a).backward(g)
  R+=[B(lambda:f(*a)),B(st)]
 ef=(R[0]-R[2])*bw/(T*n);eb=((R[1]-R[0])-(R[3]-R[2]))*bw/(T*n)
 l=f"{nm},{n},{R[0]:.4e},{R[1]:.4e},{R[2]:.4e},{R[3]:.4e},{bw:.3e},{ef:.1f},{eb:.1f},{mf},{mb}";print(l,flush=True);o.write(l+"\n");o.flush()

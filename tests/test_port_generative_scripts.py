"""Generative and dense-prediction training scripts as users write them, condensed to tiny sizes
and a few steps: (1) a DDPM with a small U-Net (sinusoidal time embedding, GroupNorm + SiLU
residual blocks, spatial self-attention by nn.MultiheadAttention and by einsum/bmm, linear beta
schedule gathered at random timesteps, AdamW + clipping + three EMA idioms, sampling under
inference_mode, checkpoint and resume); (2) a class-conditional diffusion model in the
lucidrains/diffusers style (schedule buffers, cosine schedule, AdaGN scale-shift, SDPA attention,
classifier-free guidance, min-SNR weighting, AveragedModel EMA, warmup + cosine SequentialLR,
DDIM sampling, resume mid-run); (3) a U-Net segmenter (BatchNorm, MaxPool, ConvTranspose, BCE
with pos_weight + soft Dice, IoU from logical ops, ReduceLROnPlateau, a Generator-seeded
random_split); (4) a VQ-VAE (codebook distances by the expanded formula and by cdist,
straight-through estimator, commitment loss, perplexity from bincount/histc, EMA codebook).

Each takes the framework module, so that it ports by changing ``import torch`` alone. Every
script runs on minidl (CI has no torch); with torch installed both frameworks start from the same
weights and see the same data and noise (drawn from NumPy, since the two frameworks' random
streams differ), and their losses, parameters, samples and printed logs must agree. At the end:
the regressions that running these scripts turned up."""
import copy
import math
import os
import warnings

import numpy as np
import pytest

import minidl
from test_port_whole_scripts import _assert_same, _init, _np, _ns, _params


def _init_params(torch, model, seed, scale=0.2):
    """As _init, for the parameters only: the buffers (a noise schedule, running statistics) keep
    the values the model computed."""
    rng = np.random.default_rng(seed)
    state = {}
    for k, v in model.named_parameters():
        a = v.detach().numpy()
        state[k] = torch.from_numpy((rng.standard_normal(a.shape) * scale).astype(a.dtype))
    model.load_state_dict(state, strict=False)


# (1) DDPM: a small U-Net, linear schedule, three EMA idioms, inference_mode sampling, resume ---------------
def ddpm_script(torch, workdir, log, native_random=False, epochs=2):
    t = _ns(torch)
    nn, F = t.nn, t.F
    out = {'losses': []}
    rng = np.random.default_rng(11)

    def sinusoidal_embedding(timesteps, dim):
        half = dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(0, half, dtype=torch.float32) / half)
        args = timesteps[:, None].float() * freqs[None]
        return torch.cat([torch.sin(args), torch.cos(args)], dim=-1)

    class ResBlock(nn.Module):
        def __init__(self, in_ch, out_ch, t_dim, groups=4):
            super().__init__()
            self.norm1 = nn.GroupNorm(groups, in_ch)
            self.conv1 = nn.Conv2d(in_ch, out_ch, 3, padding=1)
            self.t_proj = nn.Sequential(nn.SiLU(), nn.Linear(t_dim, out_ch))
            self.norm2 = nn.GroupNorm(groups, out_ch)
            self.dropout = nn.Dropout(0.0)
            self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1)
            self.skip = nn.Conv2d(in_ch, out_ch, 1) if in_ch != out_ch else nn.Identity()

        def forward(self, x, temb):
            h = self.conv1(F.silu(self.norm1(x)))
            h = h + self.t_proj(temb)[:, :, None, None]
            h = self.conv2(self.dropout(F.silu(self.norm2(h))))
            return h + self.skip(x)

    class SelfAttention(nn.Module):
        """Both ways of attending over the H*W positions: nn.MultiheadAttention on (B, HW, C)
        sequences, and the hand-written q k^T softmax v with einsum and bmm."""

        def __init__(self, ch, heads=2):
            super().__init__()
            self.norm = nn.GroupNorm(4, ch)
            self.mha = nn.MultiheadAttention(ch, heads, batch_first=True)
            self.qkv = nn.Conv2d(ch, ch * 3, 1, bias=False)
            self.proj = nn.Conv2d(ch, ch, 1)
            self.scale = ch ** -0.5

        def forward(self, x):
            B, C, H, W = x.shape
            h = self.norm(x)
            seq = h.flatten(2).transpose(1, 2)
            a, _ = self.mha(seq, seq, seq, need_weights=True)
            a = a.transpose(1, 2).reshape(B, C, H, W)
            q, k, v = self.qkv(h).reshape(B, 3, C, H * W).unbind(1)
            attn = (torch.einsum('bci,bcj->bij', q, k) * self.scale).softmax(dim=-1)
            o = torch.bmm(v, attn.transpose(1, 2)).view(B, C, H, W)
            return x + self.proj(o) + a

    class UNet(nn.Module):
        def __init__(self, ch=8, t_dim=16):
            super().__init__()
            self.t_dim = t_dim
            self.time_mlp = nn.Sequential(nn.Linear(t_dim, t_dim * 2), nn.SiLU(), nn.Linear(t_dim * 2, t_dim))
            self.inc = nn.Conv2d(1, ch, 3, padding=1)
            self.down1 = ResBlock(ch, ch, t_dim)
            self.pool = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
            self.down2 = ResBlock(ch, 2 * ch, t_dim)
            self.mid = nn.ModuleList([ResBlock(2 * ch, 2 * ch, t_dim), SelfAttention(2 * ch)])
            self.up = nn.ConvTranspose2d(2 * ch, ch, 4, stride=2, padding=1)
            self.up1 = ResBlock(2 * ch, ch, t_dim)
            self.up_interp = ResBlock(3 * ch, ch, t_dim)
            self.out = nn.Sequential(nn.GroupNorm(4, ch), nn.SiLU(), nn.Conv2d(ch, 1, 3, padding=1))

        def forward(self, x, t_):
            temb = self.time_mlp(sinusoidal_embedding(t_, self.t_dim))
            h1 = self.down1(self.inc(x), temb)
            h2 = self.down2(self.pool(h1), temb)
            m = self.mid[1](self.mid[0](h2, temb))
            u = self.up1(torch.cat([self.up(m), h1], dim=1), temb)
            u = self.up_interp(torch.cat((u, F.interpolate(m, scale_factor=2, mode='nearest')), 1), temb)
            return self.out(u)

    T = 20
    betas = torch.linspace(1e-4, 0.02, T)
    alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
    alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
    sqrt_ac, sqrt_1m_ac = alphas_cumprod.sqrt(), torch.sqrt(1.0 - alphas_cumprod)
    posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
    out['schedule'] = _np(posterior_variance)

    def extract(a, t_, x_shape):
        return a.gather(-1, t_).reshape(t_.shape[0], *((1,) * (len(x_shape) - 1)))

    def q_sample(x0, t_, noise):
        return extract(sqrt_ac, t_, x0.shape) * x0 + extract(sqrt_1m_ac, t_, x0.shape) * noise

    model = UNet()
    _init(torch, model, 3, 0.15)
    ema = copy.deepcopy(model).eval()
    for p in ema.parameters():
        p.requires_grad_(False)
    ema_foreach, ema_mul_add = copy.deepcopy(ema), copy.deepcopy(ema)
    optimizer = t.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-2)
    data = torch.from_numpy(rng.uniform(-1, 1, (8, 1, 8, 8)).astype(np.float32))
    loader = t.data.DataLoader(t.data.TensorDataset(data), batch_size=4, shuffle=False)
    ema_decay, step = 0.9, 0

    def draw(x0):
        if native_random:
            return torch.randint(0, T, (x0.shape[0],), device=x0.device).long(), torch.randn_like(x0)
        return (torch.from_numpy(rng.integers(0, T, x0.shape[0])),
                torch.from_numpy(rng.standard_normal(x0.shape).astype(np.float32)))

    def train_step(net, opt, x0, t_, noise):
        loss = F.mse_loss(net(q_sample(x0, t_, noise), t_), noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
        opt.step()
        return loss, gn

    for epoch in range(epochs):
        for (x0,) in loader:
            loss, gn = train_step(model, optimizer, x0, *draw(x0))
            with torch.no_grad():
                for ep, p in zip(ema.parameters(), model.parameters()):
                    ep.lerp_(p, 1 - ema_decay)
                for ep, p in zip(ema_mul_add.parameters(), model.parameters()):
                    ep.mul_(ema_decay).add_(p.detach(), alpha=1 - ema_decay)
                torch._foreach_lerp_(list(ema_foreach.parameters()), list(model.parameters()), 1 - ema_decay)
            step += 1
            out['losses'].append(loss.item())
            log(f"epoch {epoch} step {step} loss {loss.item():.5f} grad_norm {gn:.4f}")
    torch.save({'model': model.state_dict(), 'ema': ema.state_dict(), 'opt': optimizer.state_dict(),
                'step': step, 'betas': betas}, os.path.join(workdir, 'ddpm.pt'))
    out['ema_idioms'] = [_np(e.out[2].weight) for e in (ema, ema_foreach, ema_mul_add)]

    @torch.inference_mode()
    def sample(net, n, gen_noise):
        x = gen_noise((n, 1, 8, 8))
        for i in reversed(range(0, T, 4)):
            t_ = torch.full((n,), i, dtype=torch.long)
            eps = net(x, t_)
            beta_t = extract(betas, t_, x.shape)
            x0_hat = ((x - extract(sqrt_1m_ac, t_, x.shape) * eps) / extract(sqrt_ac, t_, x.shape)).clamp(-1.0, 1.0)
            mean = (x - beta_t / extract(sqrt_1m_ac, t_, x.shape) * eps) / torch.sqrt(1 - beta_t)
            x = mean + torch.sqrt(extract(posterior_variance, t_, x.shape)) * gen_noise(x.shape) if i > 0 else mean
        return x.clamp(-1, 1), x0_hat

    if native_random:
        gen = lambda s: torch.randn(s)  # noqa: E731
    else:
        srng = np.random.default_rng(5)
        gen = lambda s: torch.from_numpy(srng.standard_normal(tuple(s)).astype(np.float32))  # noqa: E731
    samples, x0_hat = sample(ema, 2, gen)
    out.update(samples=_np(samples), sample_grad=samples.requires_grad, x0_hat=_np(x0_hat),
               img=((samples + 1) * 127.5).round().to(torch.uint8).numpy())

    # resume: the reloaded model and optimizer take the next step exactly as the originals do
    ckpt = torch.load(os.path.join(workdir, 'ddpm.pt'), map_location='cpu', weights_only=False)
    model_r = UNet()
    model_r.load_state_dict(ckpt['model'])
    opt_r = t.optim.AdamW(model_r.parameters(), lr=2e-3, weight_decay=1e-2)
    opt_r.load_state_dict(ckpt['opt'])
    x0 = data[:4]
    t_, noise = draw(x0)
    out['next_loss'] = [train_step(net, opt, x0, t_, noise)[0].item()
                        for net, opt in ((model, optimizer), (model_r, opt_r))]
    out['resumed_same'] = all(torch.equal(a, b) for a, b in zip(model.parameters(), model_r.parameters()))
    out.update(resume_step=ckpt['step'], resume_betas=_np(ckpt['betas']))
    out.update(_params(model))
    out.update(_params(ema, 'ema.'))
    return out


# (2) class-conditional diffusion: buffers, cosine schedule, CFG, min-SNR, AveragedModel, DDIM, resume -------
def diffusion_script(torch, workdir, log, native_random=False, steps=4, resume_at=None):
    t = _ns(torch)
    nn, F = t.nn, t.F
    out = {'losses': [], 'lr': []}
    rng = np.random.default_rng(21)

    def cosine_beta_schedule(timesteps, s=0.008):
        x = torch.linspace(0, timesteps, timesteps + 1, dtype=torch.float64)
        ac = torch.cos(((x / timesteps) + s) / (1 + s) * math.pi * 0.5) ** 2
        ac = ac / ac[0]
        return torch.clip(1 - (ac[1:] / ac[:-1]), 0, 0.999)

    class SinusoidalPosEmb(nn.Module):
        def __init__(self, dim, theta=10000):
            super().__init__()
            self.dim, self.theta = dim, theta

        def forward(self, x):
            half_dim = self.dim // 2
            emb = math.log(self.theta) / (half_dim - 1)
            emb = torch.exp(torch.arange(half_dim, device=x.device) * -emb)
            emb = x[:, None] * emb[None, :]
            return torch.cat((emb.sin(), emb.cos()), dim=-1)

    class Block(nn.Module):
        def __init__(self, dim, dim_out, groups=2):
            super().__init__()
            self.proj = nn.Conv2d(dim, dim_out, 3, padding=1)
            self.norm, self.act = nn.GroupNorm(groups, dim_out), nn.SiLU()

        def forward(self, x, scale_shift=None):
            x = self.norm(self.proj(x))
            if scale_shift is not None:
                scale, shift = scale_shift
                x = x * (scale + 1) + shift
            return self.act(x)

    class ResnetBlock(nn.Module):
        def __init__(self, dim, dim_out, *, time_emb_dim=None):
            super().__init__()
            self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out * 2)) if time_emb_dim else None
            self.block1, self.block2 = Block(dim, dim_out), Block(dim_out, dim_out)
            self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

        def forward(self, x, time_emb=None):
            scale_shift = None
            if self.mlp is not None and time_emb is not None:
                scale_shift = self.mlp(time_emb).unsqueeze(-1).unsqueeze(-1).chunk(2, dim=1)
            return self.block2(self.block1(x, scale_shift=scale_shift)) + self.res_conv(x)

    class Attention(nn.Module):
        def __init__(self, dim, heads=2, dim_head=4):
            super().__init__()
            self.heads = heads
            self.norm = nn.GroupNorm(1, dim)
            self.to_qkv = nn.Conv2d(dim, dim_head * heads * 3, 1, bias=False)
            self.to_out = nn.Conv2d(dim_head * heads, dim, 1)

        def forward(self, x):
            b, c, h, w = x.shape
            qkv = self.to_qkv(self.norm(x)).chunk(3, dim=1)
            q, k, v = map(lambda t_: t_.reshape(b, self.heads, -1, h * w).transpose(-1, -2), qkv)
            o = F.scaled_dot_product_attention(q, k, v)
            return self.to_out(o.transpose(-1, -2).reshape(b, -1, h, w))

    class Unet(nn.Module):
        def __init__(self, dim=8, num_classes=3, cond_drop_prob=0.5):
            super().__init__()
            self.cond_drop_prob = cond_drop_prob
            time_dim = dim * 2
            self.init_conv = nn.Conv2d(1, dim, 7, padding=3)
            self.time_mlp = nn.Sequential(SinusoidalPosEmb(dim), nn.Linear(dim, time_dim), nn.GELU(),
                                          nn.Linear(time_dim, time_dim))
            self.classes_emb = nn.Embedding(num_classes, time_dim)
            self.null_classes_emb = nn.Parameter(torch.randn(time_dim))
            self.down = ResnetBlock(dim, dim, time_emb_dim=time_dim)
            self.downsample = nn.Conv2d(dim, dim * 2, 4, 2, 1)
            self.mid = ResnetBlock(dim * 2, dim * 2, time_emb_dim=time_dim)
            self.attn = Attention(dim * 2)
            self.upsample = nn.Sequential(nn.Upsample(scale_factor=2, mode='nearest'),
                                          nn.Conv2d(dim * 2, dim, 3, padding=1))
            self.up = ResnetBlock(dim * 2, dim, time_emb_dim=time_dim)
            self.final_conv = nn.Conv2d(dim, 1, 1)

        def forward(self, x, time, classes, cond_drop_prob=None, drop_mask=None):
            batch = x.shape[0]
            cond_drop_prob = self.cond_drop_prob if cond_drop_prob is None else cond_drop_prob
            classes_emb = self.classes_emb(classes)
            if cond_drop_prob > 0:
                keep_mask = (torch.zeros((batch,)).float().uniform_(0, 1) < (1 - cond_drop_prob)
                             if drop_mask is None else ~drop_mask)
                null = self.null_classes_emb.unsqueeze(0).expand(batch, -1)
                classes_emb = torch.where(keep_mask.unsqueeze(-1), classes_emb, null)
            t_ = self.time_mlp(time) + classes_emb
            x = self.init_conv(x)
            r = x.clone()
            x = self.mid(self.downsample(self.down(x, t_)), t_)
            x = self.upsample(x + self.attn(x))
            return self.final_conv(self.up(torch.cat((x, r), dim=1), t_))

        def forward_with_cond_scale(self, x, time, classes, cond_scale=1.0):
            logits = self.forward(x, time, classes, cond_drop_prob=0.0)
            null_logits = self.forward(x, time, classes, cond_drop_prob=1.0,
                                       drop_mask=torch.ones(x.shape[0], dtype=torch.bool))
            return null_logits + (logits - null_logits) * cond_scale

    class GaussianDiffusion(nn.Module):
        def __init__(self, model, timesteps=16, min_snr_gamma=5.0):
            super().__init__()
            self.model = model
            betas = cosine_beta_schedule(timesteps)
            alphas_cumprod = torch.cumprod(1. - betas, dim=0)
            self.num_timesteps = int(betas.shape[0])
            register_buffer = lambda name, val: self.register_buffer(name, val.to(torch.float32))  # noqa: E731
            register_buffer('betas', betas)
            register_buffer('alphas_cumprod', alphas_cumprod)
            register_buffer('sqrt_alphas_cumprod', torch.sqrt(alphas_cumprod))
            register_buffer('sqrt_one_minus_alphas_cumprod', torch.sqrt(1. - alphas_cumprod))
            snr = alphas_cumprod / (1 - alphas_cumprod)
            clipped = snr.clone()
            clipped.clamp_(max=min_snr_gamma)
            self.register_buffer('loss_weight', (clipped / snr).float(), persistent=False)

        def forward(self, img, classes, t_, noise, drop_mask):
            x = (self.sqrt_alphas_cumprod[t_].view(-1, 1, 1, 1) * img
                 + self.sqrt_one_minus_alphas_cumprod[t_].view(-1, 1, 1, 1) * noise)
            loss = F.mse_loss(self.model(x, t_, classes, drop_mask=drop_mask), noise, reduction='none')
            loss = loss.mean(dim=list(range(1, len(loss.shape))))
            return (loss * self.loss_weight.index_select(0, t_)).mean()

        @torch.inference_mode()
        def ddim_sample(self, classes, shape, noise_fn, sampling_timesteps=4, eta=0.5, cond_scale=2.0):
            times = list(reversed(torch.linspace(-1, self.num_timesteps - 1, steps=sampling_timesteps + 1)
                                  .int().tolist()))
            img = noise_fn(shape)
            for time, time_next in zip(times[:-1], times[1:]):
                time_cond = torch.full((shape[0],), time, dtype=torch.long)
                pred_noise = self.model.forward_with_cond_scale(img, time_cond, classes, cond_scale=cond_scale)
                x_start = (img - self.sqrt_one_minus_alphas_cumprod[time] * pred_noise) / self.sqrt_alphas_cumprod[time]
                x_start.clamp_(-1., 1.)
                if time_next < 0:
                    img = x_start
                    continue
                alpha, alpha_next = self.alphas_cumprod[time], self.alphas_cumprod[time_next]
                sigma = eta * ((1 - alpha / alpha_next) * (1 - alpha_next) / (1 - alpha)).sqrt()
                c = (1 - alpha_next - sigma ** 2).sqrt()
                img = x_start * alpha_next.sqrt() + c * pred_noise + sigma * noise_fn(shape)
            return img.clamp(-1, 1)

    diffusion = GaussianDiffusion(Unet())
    _init_params(torch, diffusion, 7, 0.2)
    out['buffers'] = [n for n, _ in diffusion.named_buffers()]
    out['state_keys'] = [k for k in diffusion.state_dict() if not k.startswith('model.')]
    ema = t.optim.swa_utils.AveragedModel(diffusion, multi_avg_fn=t.optim.swa_utils.get_ema_multi_avg_fn(0.9),
                                          use_buffers=True)
    opt = t.optim.Adam(diffusion.parameters(), lr=1e-2, betas=(0.9, 0.99))
    warmup = t.sched.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2))
    cosine = t.sched.CosineAnnealingLR(opt, T_max=steps, eta_min=1e-4)
    scheduler = t.sched.SequentialLR(opt, [warmup, cosine], milestones=[2])
    images = torch.from_numpy(rng.uniform(-1, 1, (6, 1, 8, 8)).astype(np.float32))
    labels = torch.from_numpy(rng.integers(0, 3, 6))
    draws = [(rng.integers(0, 16, 3), rng.standard_normal((3, 1, 8, 8)).astype(np.float32), rng.uniform(size=3) < 0.5,
              rng.permutation(6)[:3]) for _ in range(steps)]
    start, ckpt_path = 0, os.path.join(workdir, 'diffusion.pt')
    if resume_at is not None and os.path.exists(ckpt_path):
        data = torch.load(ckpt_path, map_location='cpu', weights_only=True)
        diffusion.load_state_dict(data['model'])
        opt.load_state_dict(data['opt'])
        ema.load_state_dict(data['ema'])
        scheduler.load_state_dict(data['sched'])
        torch.set_rng_state(data['rng'])
        start = out['resumed_from'] = data['step']
    for step in range(start, steps):
        if native_random:
            idx = torch.randperm(6)[:3]
            t_ = torch.randint(0, diffusion.num_timesteps, (3,), device='cpu').long()
            noise, drop = torch.randn_like(images[idx]), torch.rand(3) < 0.5
        else:
            ti, nz, dm, ix = draws[step]
            idx, t_, noise, drop = (torch.from_numpy(a) for a in (ix, ti, nz, dm))
        loss = diffusion(images[idx], labels[idx], t_, noise, drop)
        loss.backward()
        total_norm = nn.utils.clip_grad_norm_(diffusion.parameters(), 1.0, error_if_nonfinite=True)
        opt.step()
        opt.zero_grad()
        scheduler.step()
        ema.update_parameters(diffusion)
        out['losses'].append(loss.item())
        out['lr'].append(scheduler.get_last_lr()[0])
        log(f'step {step}: loss: {loss:.4f} norm: {total_norm:.3f} lr {opt.param_groups[0]["lr"]:.5f}')
        if resume_at is not None and step + 1 == resume_at and 'resumed_from' not in out:
            torch.save({'step': step + 1, 'model': diffusion.state_dict(), 'opt': opt.state_dict(),
                        'ema': ema.state_dict(), 'sched': scheduler.state_dict(), 'rng': torch.get_rng_state()},
                       ckpt_path)
            return out
    out['n_averaged'] = int(ema.n_averaged)
    ema.eval()
    if native_random:
        g = torch.Generator().manual_seed(0)
        noise_fn = lambda s: torch.randn(s, generator=g)  # noqa: E731
    else:
        srng = np.random.default_rng(9)
        noise_fn = lambda s: torch.from_numpy(srng.standard_normal(s).astype(np.float32))  # noqa: E731
    samples = ema.module.ddim_sample(torch.tensor([0, 2]), (2, 1, 8, 8), noise_fn)
    out.update(samples=_np(samples), samples_dtype=str(samples.dtype).split('.')[-1])
    out.update(_params(diffusion))
    out.update(_params(ema.module, 'ema.'))
    return out


# (3) U-Net segmentation: BCE with pos_weight + soft Dice, IoU, ReduceLROnPlateau, random_split ---------------
def segmentation_script(torch, workdir, log, epochs=3, shuffle=False, split=None, bilinear=False):
    t = _ns(torch)
    nn, F = t.nn, t.F
    out = {'losses': [], 'val': [], 'lr': []}

    class DoubleConv(nn.Module):
        def __init__(self, in_channels, out_channels, mid_channels=None):
            super().__init__()
            mid_channels = mid_channels or out_channels
            self.double_conv = nn.Sequential(
                nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
                nn.BatchNorm2d(mid_channels), nn.ReLU(inplace=True),
                nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
                nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True))

        def forward(self, x):
            return self.double_conv(x)

    class Down(nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

        def forward(self, x):
            return self.maxpool_conv(x)

    class Up(nn.Module):
        def __init__(self, in_channels, out_channels, bilinear):
            super().__init__()
            if bilinear:
                self.up = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)
                self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
            else:
                self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
                self.conv = DoubleConv(in_channels, out_channels)

        def forward(self, x1, x2):
            x1 = self.up(x1)
            diffY, diffX = x2.size()[2] - x1.size()[2], x2.size()[3] - x1.size()[3]
            x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
            return self.conv(torch.cat([x2, x1], dim=1))

    class UNet(nn.Module):
        def __init__(self, n_channels, n_classes, bilinear=False):
            super(UNet, self).__init__()
            factor = 2 if bilinear else 1
            self.inc = DoubleConv(n_channels, 4)
            self.down1 = Down(4, 8)
            self.down2 = Down(8, 16 // factor)
            self.up1 = Up(16, 8 // factor, bilinear)
            self.up2 = Up(8, 4, bilinear)
            self.outc = nn.Conv2d(4, n_classes, kernel_size=1)

        def forward(self, x):
            x1 = self.inc(x)
            x2 = self.down1(x1)
            return self.outc(self.up2(self.up1(self.down2(x2), x2), x1))

    def dice_loss(logits, target, smooth=1.0):
        probs = torch.sigmoid(logits)
        inter = (probs * target).sum(dim=(1, 2, 3))
        union = probs.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3))
        return 1 - ((2. * inter + smooth) / (union + smooth)).mean()

    def iou_score(logits, target, threshold=0.5):
        pred, tgt = torch.sigmoid(logits) > threshold, target.bool()
        inter = torch.logical_and(pred, tgt).sum(dim=(1, 2, 3)).float()
        union = torch.logical_or(pred, tgt).sum(dim=(1, 2, 3)).float()
        iou = torch.where(union > 0, inter / union, torch.ones_like(union))   # 0 / 0 for an empty pair
        return [iou.mean().item(), (pred ^ tgt).sum().item(), (pred & ~tgt).sum().item(),
                (pred | tgt).float().mean().item()]

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[:10, :10]
    masks = np.stack([((yy - rng.integers(2, 8)) ** 2 + (xx - rng.integers(2, 8)) ** 2 < 6).astype(np.float32)
                      for _ in range(20)])[:, None]
    masks[19] = 0   # one image with no foreground: its IoU is 0 / 0
    imgs = rng.standard_normal((20, 1, 10, 10)).astype(np.float32) * 0.3 + masks
    dataset = t.data.TensorDataset(torch.from_numpy(imgs), torch.from_numpy(masks))
    n_val = int(len(dataset) * 0.2)
    train_set, val_set = t.data.random_split(dataset, [len(dataset) - n_val, n_val],
                                             generator=torch.Generator().manual_seed(0))
    again = t.data.random_split(dataset, [0.8, 0.2], generator=torch.Generator().manual_seed(0))
    out['split'] = [type(train_set).__name__, len(train_set), len(val_set),
                    [list(s.indices) for s in again] == [list(train_set.indices), list(val_set.indices)]]
    out['indices'] = (list(train_set.indices), list(val_set.indices))
    if split is not None:   # the other framework's split, to compare the runs
        train_set.indices, val_set.indices = split
    loader_args = dict(batch_size=4, num_workers=0)
    train_loader = t.data.DataLoader(train_set, shuffle=shuffle, **loader_args)
    val_loader = t.data.DataLoader(val_set, shuffle=False, drop_last=False, **loader_args)

    model = UNet(n_channels=1, n_classes=1, bilinear=bilinear).to(memory_format=torch.channels_last)
    _init(torch, model, 4, 0.3)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_var.abs_().add_(0.5)
    all_masks = torch.from_numpy(masks)
    pos_weight = ((all_masks.numel() - all_masks.sum()) / all_masks.sum()).reshape(1)
    out['pos_weight'] = _np(pos_weight)
    criterion = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    optimizer = t.optim.RMSprop(model.parameters(), lr=1e-3, weight_decay=1e-8, momentum=0.9, foreach=True)
    scheduler = t.sched.ReduceLROnPlateau(optimizer, 'max', patience=0, factor=0.5)
    grad_scaler = torch.amp.GradScaler('cpu', enabled=False)
    log(f"params: {sum(p.numel() for p in model.parameters() if p.requires_grad)}")
    best, best_state = -1.0, None
    for epoch in range(1, epochs + 1):
        model.train()
        epoch_loss = 0
        for images, true_masks in train_loader:
            images = images.to(device='cpu', dtype=torch.float32, memory_format=torch.channels_last)
            true_masks = true_masks.to(device='cpu', dtype=torch.float32)
            with torch.autocast('cpu', enabled=False):
                masks_pred = model(images)
                loss = criterion(masks_pred, true_masks)
                loss += dice_loss(masks_pred, true_masks)
            optimizer.zero_grad(set_to_none=True)
            grad_scaler.scale(loss).backward()
            grad_scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            grad_scaler.step(optimizer)
            grad_scaler.update()
            epoch_loss += loss.item()
            out['losses'].append(loss.item())
        model.eval()
        dice_score, ious = 0, []
        with torch.no_grad():
            for image, mask_true in val_loader:
                mask_pred = model(image)
                mask_bin = (F.sigmoid(mask_pred) > 0.5).float()
                dice_score += 1 - dice_loss(mask_pred, mask_true).item()
                ious.append(iou_score(mask_pred, mask_true))
        val_score = dice_score / max(len(val_loader), 1)
        scheduler.step(val_score)
        if val_score > best:
            best, best_state = val_score, copy.deepcopy(model.state_dict())
        out['val'].append([val_score] + ious[0])
        out['lr'].append(optimizer.param_groups[0]['lr'])
        log(f"epoch {epoch}: loss {epoch_loss / len(train_loader):.4f} dice {val_score:.4f} iou {ious[0][0]:.4f} "
            f"lr {scheduler.get_last_lr()[0]:.2e} fg {mask_bin.mean():.3f}")
        state_dict = model.state_dict()
        state_dict['mask_values'] = [0, 1]
        torch.save(state_dict, os.path.join(workdir, f'checkpoint_epoch{epoch}.pth'))
    sd = torch.load(os.path.join(workdir, f'checkpoint_epoch{epochs}.pth'), map_location='cpu')
    out['mask_values'] = sd.pop('mask_values')
    net = UNet(1, 1, bilinear=bilinear)
    net.load_state_dict(sd)
    net.eval()
    with torch.no_grad():
        output = F.interpolate(net(torch.from_numpy(imgs[:1])).cpu(), (12, 12), mode='bilinear')
        out['pred'] = (torch.sigmoid(output) > 0.5)[0].long().squeeze().numpy()
    out['best'] = best
    out['best_kept'] = [k for k, v in best_state.items() if v.dtype.is_floating_point][:2]
    out['sched_state'] = {k: v for k, v in scheduler.state_dict().items()
                          if k in ('best', 'num_bad_epochs', 'last_epoch', 'mode', '_last_lr')}
    out.update(_params(model))
    return out


# (4) VQ-VAE: codebook distances, argmin, straight-through, commitment loss, perplexity, EMA codebook ---------
def vqvae_script(torch, workdir, log, steps=4, use_ema=True):
    t = _ns(torch)
    nn, F = t.nn, t.F
    out = {'losses': [], 'perplexity': [], 'usage': []}

    class VectorQuantizer(nn.Module):
        def __init__(self, num_embeddings, embedding_dim, commitment_cost):
            super().__init__()
            self._embedding_dim, self._num_embeddings = embedding_dim, num_embeddings
            self._embedding = nn.Embedding(self._num_embeddings, self._embedding_dim)
            self._embedding.weight.data.uniform_(-1 / self._num_embeddings, 1 / self._num_embeddings)
            self._commitment_cost = commitment_cost

        def forward(self, inputs):
            inputs = inputs.permute(0, 2, 3, 1).contiguous()
            input_shape = inputs.shape
            flat_input = inputs.view(-1, self._embedding_dim)
            distances = (torch.sum(flat_input ** 2, dim=1, keepdim=True)
                         + torch.sum(self._embedding.weight ** 2, dim=1)
                         - 2 * torch.matmul(flat_input, self._embedding.weight.t()))
            encoding_indices = torch.argmin(distances, dim=1).unsqueeze(1)
            encodings = torch.zeros(encoding_indices.shape[0], self._num_embeddings, device=inputs.device)
            encodings.scatter_(1, encoding_indices, 1)
            quantized = torch.matmul(encodings, self._embedding.weight).view(input_shape)
            e_latent_loss = F.mse_loss(quantized.detach(), inputs)
            q_latent_loss = F.mse_loss(quantized, inputs.detach())
            loss = q_latent_loss + self._commitment_cost * e_latent_loss
            quantized = inputs + (quantized - inputs).detach()
            avg_probs = torch.mean(encodings, dim=0)
            perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
            return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encodings.sum(0)

    class VectorQuantizerEMA(nn.Module):
        def __init__(self, num_embeddings, embedding_dim, commitment_cost, decay, epsilon=1e-5):
            super().__init__()
            self._embedding_dim, self._num_embeddings = embedding_dim, num_embeddings
            self._embedding = nn.Embedding(self._num_embeddings, self._embedding_dim)
            self._embedding.weight.data.normal_()
            self._commitment_cost = commitment_cost
            self.register_buffer('_ema_cluster_size', torch.zeros(num_embeddings))
            self._ema_w = nn.Parameter(torch.Tensor(num_embeddings, self._embedding_dim))
            self._ema_w.data.normal_()
            self._decay, self._epsilon = decay, epsilon

        def forward(self, inputs):
            inputs = inputs.permute(0, 2, 3, 1).contiguous()
            input_shape = inputs.shape
            flat_input = inputs.view(-1, self._embedding_dim)
            distances = torch.cdist(flat_input, self._embedding.weight) ** 2
            encoding_indices = distances.argmin(dim=-1)
            encodings = F.one_hot(encoding_indices, self._num_embeddings).type(flat_input.dtype)
            quantized = self._embedding(encoding_indices).view(input_shape)
            if self.training:
                with torch.no_grad():
                    self._ema_cluster_size.mul_(self._decay).add_(torch.sum(encodings, 0), alpha=1 - self._decay)
                    n = torch.sum(self._ema_cluster_size.data)
                    self._ema_cluster_size = ((self._ema_cluster_size + self._epsilon)
                                              / (n + self._num_embeddings * self._epsilon) * n)
                    dw = torch.matmul(encodings.t(), flat_input)
                    summed = torch.zeros_like(dw).index_add_(0, encoding_indices, flat_input)
                    out['index_add_gap'] = max(out.get('index_add_gap', 0.0), (dw - summed).abs().max().item())
                    self._ema_w = nn.Parameter(self._ema_w * self._decay + (1 - self._decay) * dw)
                    self._embedding.weight = nn.Parameter(self._ema_w / self._ema_cluster_size.unsqueeze(1))
            loss = self._commitment_cost * F.mse_loss(quantized.detach(), inputs)
            quantized = inputs + (quantized - inputs).detach()
            counts = torch.bincount(encoding_indices, minlength=self._num_embeddings).float()
            hist = torch.histc(encoding_indices.float(), bins=self._num_embeddings, min=0,
                               max=self._num_embeddings - 1)
            probs = counts / counts.sum()
            perplexity = torch.exp(torch.special.entr(probs).sum())   # entr(0) = 0
            entropy = t.dist.Categorical(probs=probs).entropy()
            used, used_counts = torch.unique(encoding_indices, return_counts=True)
            out.setdefault('codes_used', []).append([used.tolist(), used_counts.tolist()])
            out.setdefault('entropy_gap', []).append((entropy.exp() - perplexity).abs().item())
            return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, hist

    class Residual(nn.Module):
        def __init__(self, in_channels, num_hiddens, num_residual_hiddens):
            super().__init__()
            self._block = nn.Sequential(
                nn.ReLU(True), nn.Conv2d(in_channels, num_residual_hiddens, 3, 1, 1, bias=False),
                nn.ReLU(True), nn.Conv2d(num_residual_hiddens, num_hiddens, 1, 1, bias=False))

        def forward(self, x):
            return x + self._block(x)

    class Encoder(nn.Module):
        def __init__(self, in_channels, num_hiddens):
            super().__init__()
            self._conv_1 = nn.Conv2d(in_channels, num_hiddens // 2, kernel_size=4, stride=2, padding=1)
            self._conv_2 = nn.Conv2d(num_hiddens // 2, num_hiddens, kernel_size=4, stride=2, padding=1)
            self._conv_3 = nn.Conv2d(num_hiddens, num_hiddens, kernel_size=3, stride=1, padding=1)
            self._residual_stack = nn.ModuleList([Residual(num_hiddens, num_hiddens, 4)])

        def forward(self, inputs):
            x = self._conv_3(F.relu(self._conv_2(F.relu(self._conv_1(inputs)))))
            for layer in self._residual_stack:
                x = layer(x)
            return F.relu(x)

    class Decoder(nn.Module):
        def __init__(self, in_channels, num_hiddens):
            super().__init__()
            self._conv_1 = nn.Conv2d(in_channels, num_hiddens, 3, 1, 1)
            self._residual = Residual(num_hiddens, num_hiddens, 4)
            self._conv_trans_1 = nn.ConvTranspose2d(num_hiddens, num_hiddens // 2, 4, 2, 1)
            self._conv_trans_2 = nn.ConvTranspose2d(num_hiddens // 2, 3, 4, 2, 1)

        def forward(self, inputs):
            x = F.relu(self._residual(self._conv_1(inputs)))
            return self._conv_trans_2(F.relu(self._conv_trans_1(x)))

    class Model(nn.Module):
        def __init__(self, num_hiddens=8, num_embeddings=6, embedding_dim=4, commitment_cost=0.25, decay=0.0):
            super().__init__()
            self._encoder = Encoder(3, num_hiddens)
            self._pre_vq_conv = nn.Conv2d(num_hiddens, embedding_dim, kernel_size=1, stride=1)
            self._vq_vae = (VectorQuantizerEMA(num_embeddings, embedding_dim, commitment_cost, decay) if decay > 0.0
                            else VectorQuantizer(num_embeddings, embedding_dim, commitment_cost))
            self._decoder = Decoder(embedding_dim, num_hiddens)

        def forward(self, x):
            loss, quantized, perplexity, usage = self._vq_vae(self._pre_vq_conv(self._encoder(x)))
            return loss, self._decoder(quantized), perplexity, usage

    rng = np.random.default_rng(3)
    data = torch.from_numpy(rng.uniform(0, 1, (8, 3, 8, 8)).astype(np.float32)) - 0.5
    data_variance = torch.var(data).item()
    loader = t.data.DataLoader(t.data.TensorDataset(data), batch_size=4, shuffle=False, pin_memory=True)
    model = Model(decay=0.9 if use_ema else 0.0)
    _init(torch, model, 5, 0.3)
    if use_ema:
        with torch.no_grad():
            model._vq_vae._ema_cluster_size.abs_().add_(0.5)
    optimizer = t.optim.Adam(model.parameters(), lr=3e-3, amsgrad=False)
    model.train()
    it = 0
    while it < steps:
        for (x,) in loader:
            optimizer.zero_grad()
            vq_loss, data_recon, perplexity, usage = model(x)
            recon_error = F.mse_loss(data_recon, x) / data_variance
            loss = recon_error + vq_loss
            loss.backward()
            optimizer.step()
            out['losses'].append(loss.item())
            out['perplexity'].append(perplexity.item())
            out['usage'].append(_np(usage))
            log('%d iterations recon_error: %.3f perplexity: %.3f' % (it + 1, recon_error.item(), perplexity.item()))
            it += 1
            if it >= steps:
                break
    model.eval()
    with torch.no_grad():
        z = model._pre_vq_conv(model._encoder(data[:2]))
        flat = z.permute(0, 2, 3, 1).reshape(-1, z.shape[1])
        codebook = model._vq_vae._embedding.weight
        d_mm = torch.cdist(flat, codebook, compute_mode='use_mm_for_euclid_dist')
        d_direct = torch.cdist(flat, codebook, compute_mode='donot_use_mm_for_euclid_dist')
        codes = d_mm.argmin(-1).view(z.shape[0], z.shape[2], z.shape[3])
        oh = F.one_hot(codes, num_classes=6)
        recon = model._decoder(F.embedding(codes, codebook).permute(0, 3, 1, 2)).clamp(-0.5, 0.5)
    out.update(codes=codes.numpy().copy(), oh_dtype=str(oh.dtype).split('.')[-1], oh_shape=tuple(oh.shape),
               recon=_np(recon), cdist_modes=_np(d_mm - d_direct), codes_dtype=str(codes.dtype).split('.')[-1])
    torch.save({'model': model.state_dict(), 'opt': optimizer.state_dict()}, os.path.join(workdir, 'vq.pt'))
    ck = torch.load(os.path.join(workdir, 'vq.pt'))
    out['load'] = repr(Model(decay=0.9 if use_ema else 0.0).load_state_dict(ck['model'], strict=True))
    out.update(_params(model))
    return out


SCRIPTS = {"ddpm": ddpm_script, "diffusion": diffusion_script, "segmentation": segmentation_script,
           "vqvae": vqvae_script}
_PIN = "'pin_memory' argument is set as true"


def _run(torch, name, tmp_path, **kw):
    workdir = tmp_path / torch.__name__
    workdir.mkdir(exist_ok=True)
    lines = []
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    if torch is not minidl:   # PyTorch's intra-op threads on a busy small machine: slower than one
        torch.set_num_threads(1)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = SCRIPTS[name](torch, str(workdir), lines.append, **kw)
    finally:
        if torch is not minidl:
            torch.set_num_threads(threads)
    out["printed"] = "\n".join(lines)
    # pinned memory warns only without an accelerator (the tests' cuda simulator is one): checked apart
    out["warnings"] = [str(w.message).replace(torch.__name__, "torch") for w in caught if _PIN not in str(w.message)]
    return out


def _sanity(name, out):
    assert np.all(np.isfinite(out["losses"])) and len(out["losses"]) >= 3
    assert all(np.all(np.isfinite(v)) for k, v in out.items() if k.startswith(("p.", "ema.")))
    assert out["warnings"] == [], out["warnings"]
    if name == "ddpm":
        for other in out["ema_idioms"][1:]:           # lerp_, _foreach_lerp_ and mul_/add_ agree
            np.testing.assert_allclose(other, out["ema_idioms"][0], rtol=1e-5, atol=1e-7)
        assert out["resumed_same"] and out["next_loss"][0] == out["next_loss"][1]
        assert out["resume_step"] == len(out["losses"])
        assert not out["sample_grad"] and np.abs(out["samples"]).max() <= 1 and out["img"].dtype == np.uint8
        assert np.all(out["schedule"][1:] > 0) and out["schedule"][0] == 0
    elif name == "diffusion":
        assert "loss_weight" in out["buffers"]    # a buffer, left out of the state_dict (persistent=False)
        assert "loss_weight" not in out["state_keys"] and out["n_averaged"] == len(out["losses"])
        assert np.abs(out["samples"]).max() <= 1 and out["samples_dtype"] == "float32"
        assert out["lr"][-1] < out["lr"][1]
    elif name == "segmentation":
        assert out["split"] == ["Subset", 16, 4, True]
        train, val = out["indices"]
        assert sorted(train + val) == list(range(20))
        assert out["mask_values"] == [0, 1] and out["pred"].shape == (12, 12)
        assert all(0 <= v[1] <= 1 for v in out["val"])       # IoU in [0, 1], also with an empty mask
        assert out["lr"] == sorted(out["lr"], reverse=True)
    elif name == "vqvae":
        assert all(u.sum() == 16 for u in out["usage"]) and 1 <= min(out["perplexity"]) <= 6
        assert out["oh_shape"] == (2, 2, 2, 6) and out["oh_dtype"] == out["codes_dtype"] == "int64"
        assert np.abs(out["cdist_modes"]).max() < 1e-3 and out["load"] == "<All keys matched successfully>"
        if "codes_used" in out:
            assert out["index_add_gap"] < 1e-5 and max(out["entropy_gap"]) < 1e-4
            assert all(sum(c) == 16 for _, c in out["codes_used"])


CASES = [("ddpm", {}), ("diffusion", {}), ("segmentation", {}), ("segmentation", dict(bilinear=True)),
         ("vqvae", {}), ("vqvae", dict(use_ema=False))]


@pytest.mark.parametrize("name,kw", CASES)
def test_script_runs_on_minidl_alone(name, kw, tmp_path):
    _sanity(name, _run(minidl, name, tmp_path, **kw))


@pytest.mark.parametrize("name,kw", [("ddpm", dict(native_random=True)),
                                     ("diffusion", dict(native_random=True)),
                                     ("segmentation", dict(shuffle=True, epochs=2))])
def test_script_with_the_frameworks_own_random_draws_runs_on_minidl(name, kw, tmp_path):
    """randint / randn_like timesteps and noise, randperm batches, a shuffled DataLoader."""
    _sanity(name, _run(minidl, name, tmp_path, **kw))


@pytest.mark.parametrize("name,kw", CASES)
def test_script_matches_pytorch_from_the_same_weights(name, kw, tmp_path):
    torch = pytest.importorskip("torch")
    ours = _run(minidl, name, tmp_path, **kw)
    if name == "segmentation":   # the frameworks' generators differ: train on minidl's split
        kw = dict(kw, split=ours["indices"])
    theirs = _run(torch, name, tmp_path, **kw)
    if name == "segmentation":
        theirs["indices"] = ours["indices"]
    _assert_same(ours, theirs, name, rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize("native_random", [False, True])
def test_diffusion_resumed_mid_run_ends_where_the_uninterrupted_run_ends(native_random, tmp_path):
    """Model, optimizer, AveragedModel, SequentialLR and the global RNG state saved after 2 of 4
    steps and loaded by a fresh process-like run: the same losses, parameters and samples."""
    full = _run(minidl, "diffusion", tmp_path, native_random=native_random)
    _run(minidl, "diffusion", tmp_path, native_random=native_random, resume_at=2)
    rest = _run(minidl, "diffusion", tmp_path, native_random=native_random, resume_at=2)
    assert rest["resumed_from"] == 2 and rest["losses"] == full["losses"][2:]
    for k in full:
        if k.startswith(("p.", "ema.")) or k in ("samples", "n_averaged"):
            np.testing.assert_allclose(rest[k], full[k], rtol=1e-6, atol=1e-7, err_msg=k)


def test_diffusion_resume_matches_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    ours, theirs = ({**_run(fw, "diffusion", tmp_path, resume_at=2), **_run(fw, "diffusion", tmp_path, resume_at=2)}
                    for fw in (minidl, torch))
    _assert_same(ours, theirs, "resumed", rtol=2e-3, atol=2e-4)


# regressions found by running the scripts -------------------------------------------------------------------
def _quiet_call(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                                  "donot_use_mm_for_euclid_dist"])
def test_cdist_takes_compute_mode_and_every_mode_gives_the_distances(mode):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((30, 4)), rng.standard_normal((6, 4))
    x, y = minidl.tensor(a, requires_grad=True), minidl.tensor(b, requires_grad=True)
    d = minidl.cdist(x, y, compute_mode=mode)
    expected = np.sqrt(((a[:, None] - b[None]) ** 2).sum(-1))
    np.testing.assert_allclose(d.detach().numpy(), expected, rtol=1e-10)
    d.sum().backward()
    unit = (a[:, None] - b[None]) / expected[..., None]
    np.testing.assert_allclose(x.grad.numpy(), unit.sum(1), rtol=1e-8)
    np.testing.assert_allclose(y.grad.numpy(), -unit.sum(0), rtol=1e-8)


def test_cdist_by_matrix_product_is_zero_with_a_zero_gradient_for_coincident_points():
    x = minidl.tensor([[1.0, 2.0], [1.0, 2.0]], requires_grad=True)
    d = _quiet_call(lambda: minidl.cdist(x, x, compute_mode="use_mm_for_euclid_dist"))
    assert np.abs(d.detach().numpy()).max() < 1e-6
    d.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 2)))


@pytest.mark.parametrize("call,error,match", [
    (lambda m: m.cdist(m.ones(3, 2), m.ones(2, 2), compute_mode="fast"), ValueError,
     "fast is not a valid value for compute_mode"),
    (lambda m: m.cdist(m.ones(3, 2, dtype=m.long), m.ones(2, 2)), RuntimeError,
     "cdist only supports floating-point dtypes, X1 got"),
    (lambda m: m.cdist(m.ones(3, 2), m.ones(2, 2), p=-1.0), RuntimeError, "cdist only supports non-negative p"),
    (lambda m: m.cdist(m.ones(2), m.ones(2, 2)), RuntimeError, "cdist only supports at least 2D tensors, X1 got: 1D"),
    (lambda m: m.cdist(m.ones(3, 2), m.ones(2, 3)), RuntimeError, "X1 and X2 must have the same number of columns"),
    (lambda m: m.cdist(m.ones(3, 2), m.ones(2, 2, dtype=m.float64)), RuntimeError, "float32.*float64|Float.*Double")])
def test_cdist_refuses_bad_arguments_as_pytorch(call, error, match):
    with pytest.raises(error, match=match):
        call(minidl)
    try:
        import torch
    except ImportError:
        return
    with pytest.raises(error):
        call(torch)


def test_cdist_matches_pytorch_batched_and_by_both_paths():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 1, 27, 3)).astype(np.float32), rng.standard_normal((3, 5, 3)).astype(np.float32)
    for mode in ("use_mm_for_euclid_dist_if_necessary", "donot_use_mm_for_euclid_dist"):
        for p in (2.0, 1.0, 0.0, math.inf):
            ours = minidl.cdist(minidl.tensor(a), minidl.tensor(b), p=p, compute_mode=mode).numpy()
            theirs = torch.cdist(torch.tensor(a), torch.tensor(b), p=p, compute_mode=mode).numpy()
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_dataloader_with_pin_memory_and_no_accelerator_warns_once_per_iterator(monkeypatch):
    monkeypatch.setattr(minidl.accelerator, "is_available", lambda: False)
    loader = minidl.utils.data.DataLoader(minidl.utils.data.TensorDataset(minidl.zeros(4)), batch_size=2,
                                          pin_memory=True)
    with pytest.warns(UserWarning, match="'pin_memory' argument is set as true but no accelerator is found") as rec:
        batches = list(loader) + list(loader)
    assert len(batches) == 4 and len([w for w in rec if "pin_memory" in str(w.message)]) == 2
    _quiet_call(lambda: list(minidl.utils.data.DataLoader(minidl.zeros(4), batch_size=2)))
    monkeypatch.setattr(minidl.accelerator, "is_available", lambda: True)
    _quiet_call(lambda: list(loader))


def test_dataloader_pin_memory_warning_matches_pytorch(monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.accelerator.is_available():
        pytest.skip("PyTorch has an accelerator here: it pins without a warning")
    monkeypatch.setattr(minidl.accelerator, "is_available", lambda: False)
    messages = []
    for lib in (torch, minidl):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            list(lib.utils.data.DataLoader(lib.utils.data.TensorDataset(lib.zeros(4)), batch_size=2, pin_memory=True))
        messages.append([str(w.message) for w in caught])
    assert messages[0] == messages[1] and len(messages[0]) == 1


@pytest.mark.parametrize("call,expected", [
    (lambda m: m.tensor([-1.0, 4.0]).sqrt(), [math.nan, 2.0]),
    (lambda m: m.tensor([0.0, 1.0]).log(), [-math.inf, 0.0]),
    (lambda m: m.tensor([-1.0]).log(), [math.nan]),
    (lambda m: m.log2(m.tensor([0.0, 4.0])), [-math.inf, 2.0]),
    (lambda m: m.log10(m.tensor([0.0])), [-math.inf]),
    (lambda m: m.log1p(m.tensor([-1.0, -2.0])), [-math.inf, math.nan]),
    (lambda m: m.tensor([0.0, 1.0, -1.0]) / m.zeros(3), [math.nan, math.inf, -math.inf]),
    (lambda m: m.tensor([0.0, 1.0]) / 0, [math.nan, math.inf]),
    (lambda m: 1 / m.tensor([0.0]), [math.inf]),
    (lambda m: m.tensor([0.0]).reciprocal(), [math.inf]),
    (lambda m: m.ones(2).div_(m.zeros(2)), [math.inf, math.inf])])
def test_special_values_come_without_numpys_warning(call, expected):
    """0 / 0 in an IoU over empty masks, log 0 in an entropy, sqrt of a negative round-off: PyTorch's
    IEEE values, and no RuntimeWarning (which -W error would make an exception)."""
    np.testing.assert_array_equal(_quiet_call(lambda: call(minidl)).numpy(), np.array(expected, np.float32))


@pytest.mark.parametrize("fn,x", [(lambda t: t.sqrt(), 0.0), (lambda t: t.log(), 0.0), (lambda t: 1 / t, 0.0),
                                  (lambda t: t.log1p(), -1.0), (lambda t: t.log2(), 0.0)])
def test_gradients_at_the_poles_are_infinite_without_numpys_warning(fn, x):
    t = minidl.tensor([x, 1.0], requires_grad=True)
    _quiet_call(lambda: fn(t).sum().backward())
    assert np.isinf(t.grad.numpy()[0]) and np.isfinite(t.grad.numpy()[1])


def test_group_norm_shape_errors_are_runtime_errors_as_pytorch():
    F = minidl.nn.functional
    for call in (lambda: F.group_norm(minidl.ones(1, 2, 3, 4), 3),
                 lambda: F.group_norm(minidl.ones(1, 4, 3), 2, minidl.ones(3)),
                 lambda: F.group_norm(minidl.ones(4), 2),
                 lambda: F.batch_norm(minidl.ones(2, 4, 3), minidl.zeros(3), minidl.ones(3))):
        with pytest.raises(RuntimeError):
            call()
        with pytest.raises(ValueError):   # and still what minidl raised before
            call()


def test_group_norm_errors_match_pytorchs_type():
    torch = pytest.importorskip("torch")
    for lib in (torch, minidl):
        with pytest.raises(RuntimeError, match="divisible by num_groups"):
            lib.nn.functional.group_norm(lib.ones(1, 2, 3, 4), 3)


def test_foreach_ops_update_a_list_of_tensors_in_place_and_out_of_place():
    ema, params = [minidl.zeros(2), minidl.ones(3)], [minidl.ones(2), minidl.full((3,), 3.0)]
    assert minidl._foreach_lerp_(ema, params, 0.25) is ema
    np.testing.assert_allclose(ema[1].numpy(), [1.5, 1.5, 1.5])
    minidl._foreach_mul_(ema, 2.0)
    minidl._foreach_add_(ema, params, alpha=0.5)
    np.testing.assert_allclose(ema[0].numpy(), [1.0, 1.0])
    outs = minidl._foreach_addcmul(ema, params, params, [1.0, 0.5])
    assert isinstance(outs, tuple) and np.allclose(outs[1].numpy(), 4.5 + 0.5 * 3.0 * 3.0)
    norms = minidl._foreach_norm(params)
    np.testing.assert_allclose([n.item() for n in norms], [math.sqrt(2), math.sqrt(27)], rtol=1e-6)
    minidl._foreach_copy_(ema, params)
    minidl._foreach_zero_(params)
    assert ema[1].tolist() == [3.0] * 3 and params[1].tolist() == [0.0] * 3
    with pytest.raises(RuntimeError, match="Tensor lists must have the same number of tensors, got 2 and 1"):
        minidl._foreach_add(ema, [minidl.ones(2)])
    with pytest.raises(RuntimeError, match="at least one tensor"):
        minidl._foreach_mul([], 2.0)
    with pytest.raises(RuntimeError, match="scalar list"):
        minidl._foreach_add(ema, [1.0])
    with pytest.raises(TypeError, match="list or tuple of Tensors"):
        minidl._foreach_add(minidl.ones(2), 1.0)
    with pytest.raises(RuntimeError, match="can't be cast"):
        minidl._foreach_add_([minidl.ones(2, dtype=minidl.long)], 1.5)
    p = minidl.ones(2, requires_grad=True)
    minidl._foreach_mul([p], 3.0)[0].sum().backward()
    assert p.grad.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="leaf"):
        minidl._foreach_mul_([minidl.nn.Parameter(minidl.ones(2))], 2.0)


def test_foreach_ops_match_pytorch():
    torch = pytest.importorskip("torch")

    def run(lib):
        xs = lambda: [lib.ones(2), lib.full((3,), 2.0)]  # noqa: E731
        zs = [lib.zeros(2), lib.zeros(3)]
        calls = [lib._foreach_add(xs(), lib.tensor(3.0), alpha=2), lib._foreach_sub(xs(), xs(), alpha=0.5),
                 lib._foreach_div(xs(), [lib.full((2,), 4.0), lib.ones(3)]), lib._foreach_lerp(xs(), zs, [0.5, 0.25]),
                 lib._foreach_lerp(xs(), zs, [lib.full((2,), 0.5), lib.full((3,), 0.25)]),
                 lib._foreach_addcdiv(xs(), xs(), xs(), value=-1),
                 lib._foreach_addcmul(xs(), xs(), xs(), lib.tensor([0.5, 2])),
                 lib._foreach_pow(xs(), 2), lib._foreach_pow(2.0, xs()), lib._foreach_maximum(xs(), 1.5),
                 lib._foreach_minimum_(xs(), 1.5), lib._foreach_clamp_min(xs(), [1.5, 1.0]), lib._foreach_sqrt_(xs()),
                 lib._foreach_norm(xs(), math.inf), lib._foreach_max(xs()), lib._foreach_powsum(xs(), 2),
                 lib._foreach_powsum([lib.tensor([1.0, -2.0, 0.0])], 0),
                 lib._foreach_mm([lib.ones(2, 3)], [lib.ones(3, 1)]), lib._foreach_add([lib.ones(2, 3)], [lib.ones(3)]),
                 lib._foreach_add([lib.ones(2, dtype=lib.long)], 1.5), lib._foreach_sqrt([lib.ones(2, dtype=lib.long)])]
        return [[(str(t.dtype).split('.')[-1], t.numpy().tolist()) for t in c] for c in calls]
    assert run(minidl) == run(torch)


def test_copy_takes_non_blocking_as_pytorch():
    x = minidl.zeros(2)
    assert x.copy_(minidl.ones(2), non_blocking=True) is x and x.tolist() == [1.0, 1.0]
    x.copy_(minidl.full((2,), 2.0), True)
    assert x.tolist() == [2.0, 2.0]


def test_classic_weight_norm_warns_its_deprecation_as_pytorch():
    with pytest.warns(FutureWarning, match=r"`torch.nn.utils.weight_norm` is deprecated in favor of "
                                           r"`torch.nn.utils.parametrizations.weight_norm`") as rec:
        m = minidl.nn.utils.weight_norm(minidl.nn.Linear(3, 2))
    assert rec[0].filename == __file__
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight_g", "weight_v"]
    _quiet_call(lambda: minidl.nn.utils.parametrizations.weight_norm(minidl.nn.Linear(3, 2)))

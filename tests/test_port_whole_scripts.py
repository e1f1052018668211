"""Whole training scripts as users write them (after nanoGPT and the classic examples: MNIST, VAE,
DCGAN, word language model, fast neural style, actor-critic, LSTMCell time series with L-BFGS),
condensed to tiny sizes and a few steps. Each takes the framework module, so that it ports by
changing ``import torch`` alone. Every script runs on minidl (CI has no torch); with torch
installed both frameworks start from the same weights (loaded through state_dict from NumPy) and
see the same data, and their losses, final parameters, checkpoints and printed logs must agree.
At the end: the regressions that running these scripts turned up."""
import argparse
import importlib
import inspect
import math
import os
import re
import types
import warnings
from collections import namedtuple
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import pytest

import minidl


def _ns(torch):
    name = torch.__name__
    return types.SimpleNamespace(nn=importlib.import_module(f"{name}.nn"),
                                 F=importlib.import_module(f"{name}.nn.functional"),
                                 optim=importlib.import_module(f"{name}.optim"),
                                 sched=importlib.import_module(f"{name}.optim.lr_scheduler"),
                                 data=importlib.import_module(f"{name}.utils.data"),
                                 dist=importlib.import_module(f"{name}.distributions"))


def _np(t):
    return t.detach().float().numpy().copy() if "bfloat16" in str(t.dtype) else t.detach().numpy().copy()


def _init(torch, model, seed, scale=0.2):
    """Load the same pseudo-random weights into either framework's model (by state_dict order)."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for k, v in model.state_dict().items():
        a = v.detach().numpy()
        arrays[k] = (rng.standard_normal(a.shape) * scale).astype(a.dtype) if a.dtype.kind == "f" else a.copy()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in arrays.items()})


def _params(model, prefix="p."):
    state = model if isinstance(model, dict) else model.state_dict()
    return {prefix + k: _np(v) for k, v in state.items()}


# (1) nanoGPT: memmap batches, weight tying, SDPA, decay groups, autocast, clipping, cosine lr by hand,
# estimate_loss, checkpoint dict saved, resumed and sampled with top-k --------------------------------------
def gpt_script(torch, workdir, log, use_amp=False, iters=4):
    t = _ns(torch)
    nn, F = t.nn, t.F

    @dataclass
    class GPTConfig:
        block_size: int = 8
        vocab_size: int = 11
        n_layer: int = 2
        n_head: int = 2
        n_embd: int = 16
        dropout: float = 0.0
        bias: bool = False

    class LayerNorm(nn.Module):
        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.ln_1, self.ln_2 = LayerNorm(c.n_embd, c.bias), LayerNorm(c.n_embd, c.bias)
            self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)
            self.c_proj = nn.Linear(c.n_embd, c.n_embd, bias=c.bias)
            self.mlp = nn.Sequential(nn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias), nn.GELU(),
                                     nn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias), nn.Dropout(c.dropout))
            self.n_head, self.n_embd, self.dropout = c.n_head, c.n_embd, c.dropout

        def attn(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))
            y = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd), wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout), h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, bias=config.bias)))
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith('c_proj.weight'):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            b, t_ = idx.size()
            pos = torch.arange(0, t_, dtype=torch.long, device=idx.device)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return self.lm_head(x[:, [-1], :]), None

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay = [p for n, p in param_dict.items() if p.dim() < 2]
            groups = [{'params': decay, 'weight_decay': weight_decay}, {'params': nodecay, 'weight_decay': 0.0}]
            log(f"num decayed parameter tensors: {len(decay)}, with {sum(p.numel() for p in decay):,} parameters")
            extra_args = dict(fused=False) if 'fused' in inspect.signature(torch.optim.AdamW).parameters else {}
            return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, **extra_args)

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
            for _ in range(max_new_tokens):
                bs = self.config.block_size
                idx_cond = idx if idx.size(1) <= bs else idx[:, -bs:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float('Inf')
                probs = F.softmax(logits, dim=-1)
                idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
            return idx

    out = {}
    batch_size, block_size, learning_rate, min_lr, warmup_iters = 4, 8, 1e-2, 1e-3, 1
    ptdtype = torch.bfloat16 if use_amp else torch.float32
    ctx = torch.amp.autocast(device_type="cpu", dtype=ptdtype) if use_amp else nullcontext()

    def get_batch(rng):
        data = np.memmap(os.path.join(workdir, 'train.bin'), dtype=np.uint16, mode='r')
        ix = torch.from_numpy(rng.integers(0, len(data) - block_size, (batch_size,)))
        x = torch.stack([torch.from_numpy((data[i:i + block_size]).astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block_size]).astype(np.int64)) for i in ix])
        return x.to('cpu'), y.to('cpu')

    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        coeff = 0.5 * (1.0 + math.cos(math.pi * (it - warmup_iters) / (iters - warmup_iters)))
        return min_lr + coeff * (learning_rate - min_lr)

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        losses, rng = torch.zeros(2), np.random.default_rng(123)
        for k in range(2):
            X, Y = get_batch(rng)
            with ctx:
                _, loss = model(X, Y)
            losses[k] = loss.item()
        model.train()
        return losses.mean()

    model_args = dict(n_layer=2, n_head=2, n_embd=16, block_size=block_size, bias=False, vocab_size=11, dropout=0.0)
    model = GPT(GPTConfig(**model_args))
    out['tied'] = model.transformer.wte.weight is model.lm_head.weight
    _init(torch, model, 0)
    optimizer = model.configure_optimizers(0.1, learning_rate, (0.9, 0.95))
    rng, best_val_loss, losses = np.random.default_rng(7), 1e9, []
    X, Y = get_batch(rng)
    for iter_num in range(iters):
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        if iter_num % 2 == 0:
            val = estimate_loss()
            log(f"step {iter_num}: val loss {val:.4f}")
            if val < best_val_loss:
                best_val_loss = val
                torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'model_args': model_args,
                            'iter_num': iter_num, 'best_val_loss': best_val_loss, 'config': {'lr': learning_rate}},
                           os.path.join(workdir, 'ckpt.pt'))
        with ctx:
            logits, loss = model(X, Y)
        X, Y = get_batch(rng)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        log(f"iter {iter_num}: loss {loss.item():.4f}, lr {lr:.5f}, gn {gn.item():.4f}")
    out.update(losses=losses, logits_dtype=str(logits.dtype).split('.')[-1], **_params(model))
    checkpoint = torch.load(os.path.join(workdir, 'ckpt.pt'), map_location='cpu')
    model2 = GPT(GPTConfig(**checkpoint['model_args']))
    model2.load_state_dict(checkpoint['model'])
    opt2 = model2.configure_optimizers(0.1, learning_rate, (0.9, 0.95))
    opt2.load_state_dict(checkpoint['optimizer'])
    out.update(ckpt_iter=checkpoint['iter_num'], ckpt_best=float(checkpoint['best_val_loss']),
               ckpt_best_type=type(checkpoint['best_val_loss']).__name__, ckpt_config=repr(checkpoint['config']),
               opt2_steps=[float(s['step']) for s in opt2.state_dict()['state'].values()])
    model2.eval()
    x = torch.tensor([1, 2], dtype=torch.long, device='cpu')[None, ...]
    y = model2.generate(x, 10, temperature=0.8, top_k=5)
    out.update(gen_shape=tuple(y.shape), gen_dtype=str(y.dtype).split('.')[-1],
               gen_top1=model2.generate(x, 10, top_k=1)[0].tolist())
    return out


def _gpt_data(workdir):
    np.random.default_rng(0).integers(0, 11, 120).astype(np.uint16).tofile(os.path.join(workdir, 'train.bin'))


# (2) the MNIST example: argparse, train()/test(), Adadelta + StepLR, nll_loss sums, argmax/eq accuracy --------
def mnist_script(torch, workdir, log, shuffle=False, dropout=0.0):
    t = _ns(torch)
    nn, F = t.nn, t.F
    out = {'losses': [], 'test': []}

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.conv1, self.conv2 = nn.Conv2d(1, 4, 3, 1), nn.Conv2d(4, 8, 3, 1)
            self.dropout1, self.dropout2 = nn.Dropout2d(dropout), nn.Dropout(dropout)
            self.fc1, self.fc2 = nn.Linear(32, 16), nn.Linear(16, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
            x = torch.flatten(self.dropout1(x), 1)
            return F.log_softmax(self.fc2(self.dropout2(F.relu(self.fc1(x)))), dim=1)

    def train(args, model, device, train_loader, optimizer, epoch):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            out['losses'].append(loss.item())
            if batch_idx % args.log_interval == 0:
                log('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                    epoch, batch_idx * len(data), len(train_loader.dataset),
                    100. * batch_idx / len(train_loader), loss.item()))

    def test(model, device, test_loader):
        model.eval()
        test_loss, correct = 0, 0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction='sum').item()
                pred = output.argmax(dim=1, keepdim=True)
                correct += pred.eq(target.view_as(pred)).sum().item()
        test_loss /= len(test_loader.dataset)
        out['test'].append((test_loss, correct, type(correct).__name__))
        log('Test set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)'.format(
            test_loss, correct, len(test_loader.dataset), 100. * correct / len(test_loader.dataset)))

    parser = argparse.ArgumentParser()
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--epochs', type=int, default=2)
    parser.add_argument('--lr', type=float, default=1.0)
    parser.add_argument('--gamma', type=float, default=0.7)
    parser.add_argument('--log-interval', type=int, default=2)
    parser.add_argument('--no-cuda', action='store_true', default=False)
    args = parser.parse_args(['--no-cuda'])   # the tests' cuda is numba's simulator: far too slow here
    torch.manual_seed(1)
    device = torch.device("cuda" if not args.no_cuda and torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    x = (torch.from_numpy(rng.integers(0, 256, (32, 8, 8)).astype(np.uint8)).float().unsqueeze(1) / 255. - 0.13) / 0.3
    y = torch.from_numpy(rng.integers(0, 10, 32))
    train_loader = t.data.DataLoader(t.data.TensorDataset(x[:24], y[:24]), shuffle=shuffle, batch_size=args.batch_size)
    test_loader = t.data.DataLoader(t.data.TensorDataset(x[24:], y[24:]), batch_size=16)
    model = Net().to(device)
    _init(torch, model, 1)
    optimizer = t.optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = t.sched.StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()
    out['lr'] = scheduler.get_last_lr()
    torch.save(model.state_dict(), os.path.join(workdir, "mnist_cnn.pt"))
    out.update(_params(torch.load(os.path.join(workdir, "mnist_cnn.pt")), "saved."))
    return out


# (3) VAE: reparameterisation, BCE with reduction='sum' + KL --------------------------------------------------
def vae_script(torch, workdir, log, noise=None):
    t = _ns(torch)
    nn, F = t.nn, t.F
    out = {'losses': []}

    class VAE(nn.Module):
        def __init__(self):
            super(VAE, self).__init__()
            self.fc1, self.fc21, self.fc22 = nn.Linear(784, 16), nn.Linear(16, 4), nn.Linear(16, 4)
            self.fc3, self.fc4 = nn.Linear(4, 16), nn.Linear(16, 784)

        def reparameterize(self, mu, logvar):
            std = torch.exp(0.5 * logvar)
            eps = torch.randn_like(std) if noise is None else torch.from_numpy(noise.pop(0))
            return mu + eps * std

        def decode(self, z):
            return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

        def forward(self, x):
            h1 = F.relu(self.fc1(x.view(-1, 784)))
            mu, logvar = self.fc21(h1), self.fc22(h1)
            return self.decode(self.reparameterize(mu, logvar)), mu, logvar

    def loss_function(recon_x, x, mu, logvar):
        BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')
        KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return BCE + KLD

    model = VAE()
    _init(torch, model, 2, 0.05)
    optimizer = t.optim.Adam(model.parameters(), lr=1e-3)
    data_all = torch.from_numpy((np.random.default_rng(0).random((8, 1, 28, 28)) > 0.6).astype(np.float32))
    loader = t.data.DataLoader(t.data.TensorDataset(data_all, torch.zeros(8)), batch_size=4)
    for epoch in range(1, 3):
        model.train()
        train_loss = 0
        for batch_idx, (data, _) in enumerate(loader):
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            out['losses'].append(loss.item())
        log('====> Epoch: {} Average loss: {:.2f}'.format(epoch, train_loss / len(loader.dataset)))
        with torch.no_grad():
            sample = model.decode(torch.from_numpy(np.full((4, 4), 0.5, np.float32))).cpu()
            comparison = torch.cat([data[:2], recon_batch.view(4, 1, 28, 28)[:2]])
    out.update(sample=_np(sample.view(4, 1, 28, 28)), cmp_shape=tuple(comparison.shape), **_params(model))
    return out


# (4) DCGAN: ConvTranspose2d/BatchNorm2d/LeakyReLU, weights_init by class name, BCELoss, full/fill_ labels ----
def dcgan_script(torch, workdir, log):
    t = _ns(torch)
    nn = t.nn
    out = {'errD': [], 'errG': []}
    nz, ngf, ndf = 4, 4, 4

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find('Conv') != -1:
            torch.nn.init.normal_(m.weight, 0.0, 0.02)
        elif classname.find('BatchNorm') != -1:
            torch.nn.init.normal_(m.weight, 1.0, 0.02)
            torch.nn.init.zeros_(m.bias)

    netG = nn.Sequential(nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
                         nn.ConvTranspose2d(ngf * 2, 1, 4, 2, 1, bias=False), nn.Tanh())
    netD = nn.Sequential(nn.Conv2d(1, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
                         nn.Conv2d(ndf, ndf * 2, 2, 1, 0, bias=False), nn.BatchNorm2d(ndf * 2),
                         nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(ndf * 2, 1, 3, 1, 0, bias=False), nn.Sigmoid())
    for net, seed in ((netG, 3), (netD, 4)):
        net.apply(weights_init)
        _init(torch, net, seed, 0.3)
    criterion = nn.BCELoss()
    rng = np.random.default_rng(0)
    real = torch.from_numpy(np.tanh(rng.standard_normal((8, 1, 8, 8))).astype(np.float32))
    noises = [torch.from_numpy(rng.standard_normal((4, nz, 1, 1)).astype(np.float32)) for _ in range(4)]
    real_label, fake_label = 1, 0
    optimizerD = t.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = t.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    for i, data in enumerate(t.data.DataLoader(t.data.TensorDataset(real), batch_size=4), 0):
        netD.zero_grad()
        real_cpu = data[0]
        label = torch.full((real_cpu.size(0),), real_label, dtype=torch.float, device='cpu')
        output = netD(real_cpu).view(-1, 1).squeeze(1)
        errD_real = criterion(output, label)
        errD_real.backward()
        fake = netG(noises[i])
        label.fill_(fake_label)
        output = netD(fake.detach()).view(-1)
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()
        netG.zero_grad()
        label.fill_(real_label)
        errG = criterion(netD(fake).view(-1), label)
        errG.backward()
        optimizerG.step()
        log('[%d/%d] Loss_D: %.4f Loss_G: %.4f D(G(z)): %.4f' % (i, 2, errD.item(), errG.item(), D_G_z1))
        out['errD'].append(errD.item())
        out['errG'].append(errG.item())
    torch.save(netG.state_dict(), '%s/netG_epoch_%d.pth' % (workdir, 0))
    out.update(label_dtype=str(label.dtype).split('.')[-1], **_params(netG, "G."), **_params(netD, "D."),
               files=sorted(os.listdir(workdir)))
    return out


# (5) word language model: batchify/get_batch, LSTM with tied weights, repackage_hidden, manual SGD --------
def word_lm_script(torch, workdir, log, dropout=0.0):
    t = _ns(torch)
    nn = t.nn
    out = {'losses': [], 'val': []}

    class RNNModel(nn.Module):
        def __init__(self, ntoken, ninp, nhid, nlayers, dropout):
            super(RNNModel, self).__init__()
            self.ntoken, self.nhid, self.nlayers = ntoken, nhid, nlayers
            self.drop, self.encoder = nn.Dropout(dropout), nn.Embedding(ntoken, ninp)
            self.rnn = getattr(nn, 'LSTM')(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            self.decoder.weight = self.encoder.weight
            nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)

        def forward(self, input, hidden):
            output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
            decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
            return t.F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))

    def batchify(data, bsz):
        nbatch = data.size(0) // bsz
        return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()

    def repackage_hidden(h):
        return h.detach() if isinstance(h, torch.Tensor) else tuple(repackage_hidden(v) for v in h)

    bptt, lr, clip = 5, 2.0, 0.25

    def get_batch(source, i):
        seq_len = min(bptt, len(source) - 1 - i)
        return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)

    ids = torch.tensor(np.random.default_rng(0).integers(0, 13, 70).tolist(), dtype=torch.int64)
    train_data, val_data = batchify(ids[:50], 4), batchify(ids[50:], 2)
    model = RNNModel(13, 8, 8, 2, dropout)
    _init(torch, model, 5, 0.3)
    criterion = nn.NLLLoss()
    for epoch in range(1, 3):
        model.train()
        hidden = model.init_hidden(4)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
            data, targets = get_batch(train_data, i)
            model.zero_grad()
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            out['losses'].append(loss.item())
        model.eval()
        total_loss, hidden = 0., model.init_hidden(2)
        with torch.no_grad():
            for i in range(0, val_data.size(0) - 1, bptt):
                data, targets = get_batch(val_data, i)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        val_loss = total_loss / (len(val_data) - 1)
        out['val'].append(val_loss)
        log('| end of epoch {:3d} | valid loss {:5.2f} | valid ppl {:8.2f}'.format(epoch, val_loss, math.exp(val_loss)))
    out.update(train_shape=tuple(train_data.shape), **_params(model))
    return out


# (6) fast neural style: reflection-padded convs, InstanceNorm2d(affine), upsampling, a frozen VGG-like net,
# gram matrices and mse losses ----------------------------------------------------------------------------
def style_script(torch, workdir, log, optimizer_name="SGD"):
    t = _ns(torch)
    nn = t.nn

    class ConvLayer(nn.Module):
        def __init__(self, cin, cout, k, stride, upsample=None):
            super(ConvLayer, self).__init__()
            self.upsample = upsample
            self.reflection_pad = torch.nn.ReflectionPad2d(k // 2)
            self.conv2d = torch.nn.Conv2d(cin, cout, k, stride)

        def forward(self, x):
            if self.upsample:
                x = torch.nn.functional.interpolate(x, mode='nearest', scale_factor=self.upsample)
            return self.conv2d(self.reflection_pad(x))

    class TransformerNet(nn.Module):
        def __init__(self):
            super(TransformerNet, self).__init__()
            self.conv1, self.in1 = ConvLayer(3, 4, 5, 1), nn.InstanceNorm2d(4, affine=True)
            self.conv2, self.in2 = ConvLayer(4, 8, 3, 2), nn.InstanceNorm2d(8, affine=True)
            self.deconv1, self.in3 = ConvLayer(8, 4, 3, 1, upsample=2), nn.InstanceNorm2d(4, affine=True)
            self.up, self.deconv2 = nn.Upsample(scale_factor=1, mode='nearest'), ConvLayer(4, 3, 5, 1)
            self.relu = nn.ReLU()

        def forward(self, X):
            y = self.relu(self.in2(self.conv2(self.relu(self.in1(self.conv1(X))))))
            return self.deconv2(self.up(self.relu(self.in3(self.deconv1(y)))))

    class Vgg(nn.Module):
        def __init__(self):
            super(Vgg, self).__init__()
            self.slice1 = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True))
            self.slice2 = nn.Sequential(nn.MaxPool2d(kernel_size=2, stride=2), nn.Conv2d(4, 8, 3, padding=1),
                                        nn.ReLU(inplace=True))
            for param in self.parameters():
                param.requires_grad = False

        def forward(self, X):
            h1 = self.slice1(X)
            return namedtuple("VggOutputs", ['relu1_2', 'relu2_2'])(h1, self.slice2(h1))

    def gram_matrix(y):
        (b, ch, h, w) = y.size()
        features = y.view(b, ch, w * h)
        return features.bmm(features.transpose(1, 2)) / (ch * h * w)

    def normalize_batch(batch):
        mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
        std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
        return (batch.div_(255.0) - mean) / std

    rng = np.random.default_rng(0)
    content = (rng.random((4, 3, 8, 8)) * 255).astype(np.float32)
    transformer, vgg = TransformerNet(), Vgg()
    _init(torch, transformer, 6)
    _init(torch, vgg, 7, 0.3)
    optimizer = (t.optim.SGD(transformer.parameters(), 1e-7) if optimizer_name == "SGD"
                 else t.optim.Adam(transformer.parameters(), 1e-2))
    mse_loss = torch.nn.MSELoss()
    style = torch.from_numpy((rng.random((1, 3, 8, 8)) * 255).astype(np.float32)).repeat(2, 1, 1, 1)
    gram_style = [gram_matrix(y) for y in vgg(normalize_batch(style))]
    out = {'content': [], 'style': []}
    for batch_id in range(2):
        x = torch.from_numpy(content[batch_id * 2:(batch_id + 1) * 2].copy())
        optimizer.zero_grad()
        features_y, features_x = vgg(normalize_batch(transformer(x))), vgg(normalize_batch(x))
        content_loss = 1e2 * mse_loss(features_y.relu2_2, features_x.relu2_2)
        style_loss = 0.
        for ft_y, gm_s in zip(features_y, gram_style):
            style_loss += mse_loss(gram_matrix(ft_y), gm_s[:len(x), :, :])
        style_loss *= 1e7
        (content_loss + style_loss).backward()
        optimizer.step()
        out['content'].append(content_loss.item())
        out['style'].append(style_loss.item())
        log("[{}/2]\tcontent: {:.4f}\tstyle: {:.2f}".format(batch_id + 1, content_loss.item(), style_loss.item()))
    transformer.eval().cpu()
    torch.save(transformer.state_dict(), os.path.join(workdir, 'style.model'))
    styled = TransformerNet()
    styled.load_state_dict(torch.load(os.path.join(workdir, 'style.model')))
    with torch.no_grad():
        img = styled(torch.from_numpy(content[:1].copy())).cpu()[0].clone().clamp(0, 255).numpy()
    out.update(img=img.transpose(1, 2, 0).astype("uint8"), vgg_grad_none=[p.grad is None for p in vgg.parameters()],
               **_params(transformer))
    return out


# (7) actor-critic on a tiny line world: Categorical(probs), log_prob, normalised returns, smooth_l1 ----------
def actor_critic_script(torch, workdir, log, actions=None):
    t = _ns(torch)
    nn, F = t.nn, t.F
    SavedAction = namedtuple('SavedAction', ['log_prob', 'value'])
    eps = np.finfo(np.float32).eps.item()
    out = {'actions': [], 'loss': [], 'reinforce': [], 'returns': []}

    class Policy(nn.Module):
        def __init__(self):
            super(Policy, self).__init__()
            self.affine1, self.action_head, self.value_head = nn.Linear(3, 16), nn.Linear(16, 2), nn.Linear(16, 1)
            self.saved_actions, self.rewards = [], []

        def forward(self, x):
            x = F.relu(self.affine1(x))
            return F.softmax(self.action_head(x), dim=-1), self.value_head(x)

    model = Policy()
    _init(torch, model, 8, 0.5)
    optimizer = t.optim.Adam(model.parameters(), lr=3e-2)
    replay = list(actions) if actions is not None else None
    obs_rng = np.random.default_rng(1)
    for i_episode in range(3):
        pos = 2
        for step in range(1, 8):
            state = torch.from_numpy(np.array([pos / 4.0, step / 8.0, obs_rng.standard_normal()])).float()
            probs, state_value = model(state)
            m = t.dist.Categorical(probs)
            action = m.sample() if replay is None else torch.tensor(replay.pop(0))
            model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
            out['actions'].append(action.item())
            pos += 1 if action.item() == 1 else -1
            model.rewards.append(float(pos == 4) + 0.1 * step)
            if pos in (0, 4):
                break
        R, returns = 0, []
        for r in model.rewards[::-1]:
            R = r + 0.99 * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        policy_losses, value_losses, reinforce = [], [], []
        for (log_prob, value), R in zip(model.saved_actions, returns):
            policy_losses.append(-log_prob * (R - value.item()))
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
            reinforce.append((-log_prob * R).unsqueeze(0))
        optimizer.zero_grad()
        loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
        loss.backward()
        optimizer.step()
        out['loss'].append(loss.item())
        out['reinforce'].append(torch.cat(reinforce).sum().item())
        out['returns'].append(_np(returns))
        log('Episode {}\tLast length: {}\tloss: {:.4f}'.format(i_episode, len(model.rewards), loss.item()))
        del model.rewards[:]
        del model.saved_actions[:]
    out.update(_params(model))
    return out


# (8) time-series LSTMCell in float64 with L-BFGS and a closure, predicting the future ----------------------
def time_series_script(torch, workdir, log):
    t = _ns(torch)
    nn = t.nn
    out = {'loss': [], 'test': []}

    class Sequence(nn.Module):
        def __init__(self):
            super(Sequence, self).__init__()
            self.lstm1, self.lstm2, self.linear = nn.LSTMCell(1, 6), nn.LSTMCell(6, 6), nn.Linear(6, 1)

        def forward(self, input, future=0):
            outputs = []
            h_t, c_t, h_t2, c_t2 = (torch.zeros(input.size(0), 6, dtype=torch.double) for _ in range(4))
            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for i in range(future):
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            return torch.cat(outputs, dim=1)

    x = np.arange(10) + np.random.default_rng(2).integers(-80, 80, 5).reshape(5, 1)
    data = np.sin(x / 20.0).astype('float64')
    input, target = torch.from_numpy(data[2:, :-1]), torch.from_numpy(data[2:, 1:])
    test_input, test_target = torch.from_numpy(data[:2, :-1]), torch.from_numpy(data[:2, 1:])
    seq = Sequence()
    seq.double()
    _init(torch, seq, 9, 0.3)
    criterion = nn.MSELoss()
    optimizer = t.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=6)
    for i in range(2):
        def closure():
            optimizer.zero_grad()
            loss = criterion(seq(input), target)
            out['loss'].append(loss.item())
            loss.backward()
            return loss
        ret = optimizer.step(closure)
        with torch.no_grad():
            pred = seq(test_input, future=3)
            loss = criterion(pred[:, :-3], test_target)
            log('test loss: {:.10f}'.format(loss.item()))
            out['test'].append(loss.item())
        np.save(os.path.join(workdir, 'predict%d' % i), pred.detach().numpy())
    out['pred'] = np.load(os.path.join(workdir, 'predict1.npy'))
    state = optimizer.state_dict()['state'][0]
    out.update(ret_dtype=str(ret.dtype).split('.')[-1], func_evals=state['func_evals'], n_iter=state['n_iter'],
               **_params(seq))
    return out


SCRIPTS = {"gpt": gpt_script, "mnist": mnist_script, "vae": vae_script, "dcgan": dcgan_script,
           "word_lm": word_lm_script, "style": style_script, "actor_critic": actor_critic_script,
           "time_series": time_series_script}
TOLERANCE = {"time_series": dict(rtol=1e-7, atol=1e-9), "style": dict(rtol=1e-3, atol=1e-4)}


def _run(torch, name, tmp_path, **kw):
    workdir = tmp_path / torch.__name__
    workdir.mkdir(exist_ok=True)
    if name == "gpt":
        _gpt_data(str(workdir))
    lines = []
    torch.manual_seed(0)
    if name == "vae" and "noise" not in kw:
        rng = np.random.default_rng(5)
        kw["noise"] = [rng.standard_normal((4, 4)).astype(np.float32) for _ in range(4)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = SCRIPTS[name](torch, str(workdir), lines.append, **kw)
    out["printed"] = "\n".join(lines)
    out["warnings"] = [str(w.message).replace(torch.__name__, "torch") for w in caught]
    return out


_NUMBER = re.compile(r"-?\d+\.?\d*(?:e[-+]?\d+)?")


def _assert_same(ours, theirs, key="", rtol=1e-4, atol=1e-5):
    """Equal structure; numbers (also those inside printed text) equal within the tolerance."""
    if isinstance(theirs, dict):
        assert sorted(ours) == sorted(theirs), key
        for k in theirs:
            _assert_same(ours[k], theirs[k], f"{key}.{k}", rtol, atol)
    elif isinstance(theirs, str):
        assert _NUMBER.sub("#", ours) == _NUMBER.sub("#", theirs), key
        np.testing.assert_allclose([float(v) for v in _NUMBER.findall(ours)],
                                   [float(v) for v in _NUMBER.findall(theirs)], rtol=rtol, atol=atol, err_msg=key)
    elif isinstance(theirs, (list, tuple)) and (not all(isinstance(v, (int, float, np.ndarray)) for v in theirs)
                                                 or len({np.shape(v) for v in theirs}) > 1):
        assert len(ours) == len(theirs), key
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_same(a, b, f"{key}[{i}]", rtol, atol)
    else:
        a, b = np.asarray(ours), np.asarray(theirs)
        assert a.shape == b.shape and a.dtype == b.dtype, (key, a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=key)


def _sanity(name, out):
    losses = {"gpt": "losses", "mnist": "losses", "vae": "losses", "dcgan": "errD", "word_lm": "losses",
              "style": "style", "actor_critic": "loss", "time_series": "loss"}[name]
    assert np.all(np.isfinite(out[losses])) and len(out[losses]) >= 2
    assert all(np.all(np.isfinite(v)) for k, v in out.items() if k[:2] in ("p.", "G.", "D."))
    assert out["warnings"] == [], out["warnings"]
    if name == "gpt":
        assert out["tied"] and out["ckpt_iter"] == 2 and out["ckpt_best_type"] == "Tensor"
        assert out["gen_shape"] == (1, 12) and out["gen_dtype"] == "int64" and len(out["gen_top1"]) == 12
        assert out["opt2_steps"] == [2.0] * len(out["opt2_steps"])
    elif name == "mnist":
        assert [type(c) for _, c, _ in out["test"]] == [int, int] and out["test"][0][2] == "int"
        np.testing.assert_allclose(out["lr"], [0.49])
        assert all(np.array_equal(out["saved." + k[2:]], v) for k, v in out.items() if k.startswith("p."))
    elif name == "time_series":
        assert out["loss"][-1] < out["loss"][0] and out["ret_dtype"] == "float64" and out["pred"].shape == (2, 12)
    elif name == "actor_critic":
        for r in out["returns"]:
            np.testing.assert_allclose([r.mean(), r.std(ddof=1)], [0, 1], atol=1e-5)
    elif name == "style":
        assert out["vgg_grad_none"] == [True] * 4 and out["img"].dtype == np.uint8


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_runs_on_minidl_alone(name, tmp_path):
    _sanity(name, _run(minidl, name, tmp_path))


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_matches_pytorch_from_the_same_weights(name, tmp_path):
    torch = pytest.importorskip("torch")
    ours = _run(minidl, name, tmp_path)
    kw = {"actions": ours["actions"]} if name == "actor_critic" else {}   # replay minidl's sampled actions
    theirs = _run(torch, name, tmp_path, **kw)
    _assert_same(ours, theirs, name, **TOLERANCE.get(name, {}))


@pytest.mark.parametrize("name,kw", [("gpt", dict(use_amp=True)), ("mnist", dict(shuffle=True, dropout=0.25)),
                                     ("vae", dict(noise=None)), ("word_lm", dict(dropout=0.2)),
                                     ("style", dict(optimizer_name="Adam"))])
def test_script_variants_run_on_minidl(name, kw, tmp_path):
    """The random or low-precision variants: shuffled batches, dropout, sampled noise, bfloat16 autocast."""
    out = _run(minidl, name, tmp_path, **kw)
    _sanity(name, out)
    if name == "gpt":
        assert out["logits_dtype"] == "bfloat16"


def test_gpt_under_autocast_matches_pytorch_losses(tmp_path):
    torch = pytest.importorskip("torch")
    ours, theirs = (_run(fw, "gpt", tmp_path, use_amp=True) for fw in (minidl, torch))
    assert ours["logits_dtype"] == theirs["logits_dtype"] == "bfloat16"
    np.testing.assert_allclose(ours["losses"], theirs["losses"], atol=5e-3)


# regressions found by running the scripts -------------------------------------------------------------------
@pytest.mark.parametrize("data,expected", [
    ([np.float64(1.5)], "float64"), ([np.float64(1.5), 2.0], "float64"), ([[np.float64(1.0)], [2.0]], "float64"),
    ((np.float64(1.5),), "float64"), ([np.float32(1.0), 1], "float32"), ([np.int32(1)], "int32"),
    ([np.int32(1), 2.5], "float32"), ([np.int64(1), 2.0], "float32"), ([np.float16(1.0)], "float16"),
    ([np.uint8(1)], "uint8"), ([np.array([1.5])], "float64"), ([1.5, 2], "float32"), ([True, 2], "int64"),
    ([np.float64(1.0), 2 ** 70], "float64")])
def test_tensor_of_a_list_with_numpy_scalars_promotes_their_dtypes(data, expected):
    """Rewards from NumPy (np.float64) gathered in a list: torch.tensor(returns) is float64."""
    assert str(minidl.tensor(data).dtype) == f"minidl.{expected}"
    assert str(minidl.tensor([minidl.tensor(1.5, dtype=minidl.float64)]).dtype) == "minidl.float64"


def test_tensor_of_a_list_with_numpy_scalars_matches_pytorch():
    torch = pytest.importorskip("torch")
    for data in ([np.float64(1.5), 2.0], [np.int32(1)], [np.float16(1.0), 2.0], [np.int64(1), 2.0]):
        assert str(minidl.tensor(data).dtype)[7:] == str(torch.tensor(data).dtype)[6:]


def test_multinomial_refuses_integer_weights():
    with pytest.raises(RuntimeError, match="multinomial only supports floating-point dtypes for input, got"):
        minidl.multinomial(minidl.tensor([1, 1]), 1)
    assert minidl.multinomial(minidl.tensor([0.0, 1.0]), 1).tolist() == [1]


@pytest.mark.parametrize("call,name", [(lambda m: m.tensor([1.0]).std(), "std"),
                                       (lambda m: m.ones(2, 1).var(1), "var"),
                                       (lambda m: m.tensor([1.0, 2.0]).std(correction=2), "std")])
def test_std_and_var_without_degrees_of_freedom_warn_as_pytorch(call, name):
    """A one-step episode's returns.std(): NaN with PyTorch's UserWarning, not NumPy's RuntimeWarning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call(minidl)
    assert np.isnan(out.numpy()).all() or np.isinf(out.numpy()).all()
    assert [w.category for w in caught] == [UserWarning]
    assert str(caught[0].message).startswith(f"{name}(): degrees of freedom is <= 0. Correction should be strictly")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        minidl.tensor([1.0, 2.0]).std()


def test_dropout2d_reads_a_3d_input_as_a_batch_of_1d_channels_with_pytorchs_warning():
    minidl.manual_seed(0)
    x = minidl.ones(6, 5, 7)
    with pytest.warns(UserWarning, match="dropout2d: Received a 3D input to dropout2d and assuming that channel-wise"):
        y = minidl.nn.Dropout2d(0.5)(x).numpy()
    assert (y.min(-1) == y.max(-1)).all()          # x[n, c, :] drops as a whole
    assert not (y.min((0, 2)) == y.max((0, 2))).all()   # not x[c, :, :], an unbatched (C, H, W) image
    assert set(np.unique(y)) == {0.0, 2.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        minidl.nn.functional.dropout2d(minidl.ones(2, 3, 4, 4), 0.5)


@pytest.mark.parametrize("op, shape, lead", [("dropout2d", (40, 50), 2), ("dropout2d", (6, 5, 2, 3, 4), 2),
                                             ("dropout3d", (40, 50), 1), ("dropout3d", (60, 5, 7), 1),
                                             ("dropout3d", (60,), 1)])
def test_channel_dropout_takes_other_ranks_with_pytorchs_deprecation_warning(op, shape, lead):
    """As PyTorch: dropout2d reads another rank as (N, C, ...), so the old MNIST example's Dropout2d
    after a Linear layer drops single elements; dropout3d reads it as one unbatched (C, ...)."""
    minidl.manual_seed(0)
    with pytest.warns(UserWarning, match=rf"{op}: Received a {len(shape)}-D input to {op}, which is deprecated"):
        y = getattr(minidl.nn.functional, op)(minidl.ones(*shape), 0.5).numpy()
    assert set(np.unique(y)) == {0.0, 2.0}
    maps = y.reshape(*shape[:lead], -1)
    assert (maps.min(-1) == maps.max(-1)).all()     # each map of the leading dims drops as a whole
    assert 0.25 < (maps[..., 0] == 0).mean() < 0.75


def test_channel_dropout_warning_and_rank_match_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, minidl):
        with pytest.warns(UserWarning, match="dropout2d: Received a 2-D input to dropout2d, which is deprecated"):
            assert tuple(lib.nn.functional.dropout2d(lib.ones(2, 3), 0.5).shape) == (2, 3)
        with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions in the input"):
            lib.nn.functional.dropout2d(lib.ones(3), 0.5)
        with pytest.warns(UserWarning, match="dropout3d: Received a 1-D input to dropout3d"):
            assert tuple(lib.nn.functional.dropout3d(lib.ones(3), 0.5).shape) == (3,)


@pytest.mark.parametrize("name,expected", [("add_", [0.0, -2.0]), ("sub_", [2.0, 4.0])])
def test_add_and_sub_in_place_accept_the_deprecated_alpha_first_overload(name, expected):
    """Older word-language-model scripts step with p.data.add_(-lr, p.grad)."""
    p, g = minidl.tensor([1.0, 1.0]), minidl.tensor([1.0, 3.0])
    with pytest.warns(UserWarning, match=rf"This overload of {name} is deprecated:\n\t{name}\(Number alpha"):
        getattr(p, name)(-1.0, g)
    np.testing.assert_array_equal(p.numpy(), expected)
    np.testing.assert_array_equal(minidl.tensor([1.0]).add_(minidl.tensor([2.0]), alpha=3).numpy(), [7.0])


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_of_a_fully_masked_row_is_nan_without_a_numpy_warning(fn):
    """An attention row whose keys are all masked (-inf): NaN, as PyTorch, and no RuntimeWarning."""
    x = minidl.tensor([[-math.inf, -math.inf], [1.0, -math.inf]], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = getattr(minidl.nn.functional, fn)(x, dim=-1)
        y[1].sum().backward()
    expected = [[math.nan, math.nan], [1.0, 0.0] if fn == "softmax" else [0.0, -math.inf]]
    np.testing.assert_array_equal(y.detach().numpy(), expected)
    np.testing.assert_array_equal(x.grad.numpy()[1], [0.0, 0.0] if fn == "softmax" else [-1.0, 1.0])

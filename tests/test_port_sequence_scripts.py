"""Sequence-model training scripts as users write them (after the classic PyTorch tutorials: seq2seq
translation with attention, the chatbot, nn.Transformer translation, text classification with
EmbeddingBag and with a packed LSTM, a character generator on LSTMCell/GRUCell), condensed to tiny
sizes and a few steps. Each takes the framework module, so it ports by changing ``import torch``
alone. Every script runs on minidl (CI has no torch); with torch installed both frameworks start
from the same weights (loaded through state_dict from NumPy), see the same data and must agree on
losses, final parameters, decoded tokens, printed logs and warnings. Sampling draws from each
framework's own generator, so only what does not depend on the draws is compared across them.
Here the translation scripts (and the harness); the classifiers and the generator are in
test_port_sequence_classifiers.py, the focused regressions in test_port_sequence_regressions.py."""
import importlib
import itertools
import math
import os
import random
import types
import warnings

import numpy as np
import pytest

import minidl
from test_port_whole_scripts import _assert_same as assert_same

PAD, SOS, EOS = 0, 1, 2


def _ns(torch):
    name = torch.__name__
    return types.SimpleNamespace(nn=importlib.import_module(f"{name}.nn"),
                                 F=importlib.import_module(f"{name}.nn.functional"),
                                 optim=importlib.import_module(f"{name}.optim"),
                                 sched=importlib.import_module(f"{name}.optim.lr_scheduler"),
                                 data=importlib.import_module(f"{name}.utils.data"),
                                 rnn=importlib.import_module(f"{name}.nn.utils.rnn"))


def _np(t):
    return t.detach().numpy().copy()


def _init(torch, model, seed, scale=0.2):
    """Load the same pseudo-random weights into either framework's model (by state_dict order)."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for k, v in model.state_dict().items():
        a = v.detach().numpy()
        arrays[k] = (rng.standard_normal(a.shape) * scale).astype(a.dtype) if a.dtype.kind == "f" else a.copy()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in arrays.items()})


def _params(model, prefix="p."):
    return {prefix + k: _np(v) for k, v in model.state_dict().items()}


def _dtype(t):
    return str(t.dtype).split(".")[-1]


def _pairs(n, seed, vocab=10, lo=2, hi=6):
    """Toy translation pairs (reverse the sequence) of varied lengths, tokens from 3 up."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        src = [int(v) for v in rng.integers(3, vocab, rng.integers(lo, hi + 1))]
        out.append((src, src[::-1]))
    return out


# (1) GRU seq2seq: bidirectional 2-layer encoder over packed sequences, Bahdanau or Luong attention, teacher
# forcing by random.random(), label-smoothed loss ignoring PAD, clipping, StepLR, greedy translation --------------
def seq2seq_script(torch, workdir, log, attention="bahdanau", dropout=0.0):
    t = _ns(torch)
    nn, F, rnn_utils = t.nn, t.F, t.rnn
    V, E, H = 10, 8, 8
    out = {'loss': [], 'valid': [], 'lr': [], 'norm': []}

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E, padding_idx=PAD)
            self.rnn = nn.GRU(E, H, num_layers=2, bidirectional=True, dropout=dropout)
            self.fc = nn.Linear(H * 2, H)
            self.dropout = nn.Dropout(dropout)

        def forward(self, src, src_len):
            embedded = self.dropout(self.embedding(src))
            packed = rnn_utils.pack_padded_sequence(embedded, src_len.to('cpu'), enforce_sorted=False)
            packed_outputs, hidden = self.rnn(packed)
            outputs, _ = rnn_utils.pad_packed_sequence(packed_outputs, padding_value=0.0)
            hidden = torch.tanh(self.fc(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)))
            return outputs, hidden

    class Bahdanau(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.Linear(H * 2 + H, H)
            self.v = nn.Linear(H, 1, bias=False)

        def forward(self, hidden, encoder_outputs, mask):
            hidden = hidden.unsqueeze(1).repeat(1, encoder_outputs.shape[0], 1)
            energy = torch.tanh(self.attn(torch.cat((hidden, encoder_outputs.permute(1, 0, 2)), dim=2)))
            attention = self.v(energy).squeeze(2).masked_fill(mask == 0, -1e10)
            return F.softmax(attention, dim=1)

    class BahdanauDecoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Bahdanau()
            self.embedding = nn.Embedding(V, E)
            self.rnn = nn.GRU(H * 2 + E, H)
            self.fc_out = nn.Linear(H * 2 + H + E, V)
            self.dropout = nn.Dropout(dropout)

        def forward(self, input, hidden, encoder_outputs, mask):
            embedded = self.dropout(self.embedding(input.unsqueeze(0)))
            a = self.attention(hidden, encoder_outputs, mask).unsqueeze(1)
            weighted = torch.bmm(a, encoder_outputs.permute(1, 0, 2)).permute(1, 0, 2)
            output, hidden = self.rnn(torch.cat((embedded, weighted), dim=2), hidden.unsqueeze(0))
            assert (output == hidden).all()
            prediction = self.fc_out(torch.cat((output.squeeze(0), weighted.squeeze(0), embedded.squeeze(0)), dim=1))
            return prediction, hidden.squeeze(0), a.squeeze(1)

    class LuongDecoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E)
            self.embedding_dropout = nn.Dropout(dropout)
            self.gru = nn.GRU(E, H, 1)
            self.attn = nn.Linear(2 * H, H, bias=False)
            self.concat = nn.Linear(H + 2 * H, H)
            self.out = nn.Linear(H, V)

        def forward(self, input_step, last_hidden, encoder_outputs, mask):
            embedded = self.embedding_dropout(self.embedding(input_step).unsqueeze(0))
            rnn_output, hidden = self.gru(embedded, last_hidden.unsqueeze(0).contiguous())
            enc = encoder_outputs.transpose(0, 1)
            energy = torch.bmm(self.attn(enc), rnn_output.transpose(0, 1).transpose(1, 2)).squeeze(2)
            attn_weights = F.softmax(energy.masked_fill(~mask, float('-inf')), dim=1).unsqueeze(1)
            context = attn_weights.bmm(enc)
            concat_output = torch.tanh(self.concat(torch.cat((rnn_output.squeeze(0), context.squeeze(1)), 1)))
            return self.out(concat_output), hidden.squeeze(0), attn_weights.squeeze(1)

    class Seq2Seq(nn.Module):
        def __init__(self, encoder, decoder):
            super().__init__()
            self.encoder, self.decoder = encoder, decoder

        def create_mask(self, src):
            return (src != PAD).permute(1, 0)

        def forward(self, src, src_len, trg, teacher_forcing_ratio=0.5):
            outputs = torch.zeros(trg.shape[0], src.shape[1], V)
            encoder_outputs, hidden = self.encoder(src, src_len)
            input, mask = trg[0, :], self.create_mask(src)
            for t_ in range(1, trg.shape[0]):
                output, hidden, _ = self.decoder(input, hidden, encoder_outputs, mask)
                outputs[t_] = output
                teacher_force = random.random() < teacher_forcing_ratio
                input = trg[t_] if teacher_force else output.argmax(1)
            return outputs

    class PairDataset(t.data.Dataset):
        def __init__(self, pairs):
            self.pairs = pairs

        def __len__(self):
            return len(self.pairs)

        def __getitem__(self, i):
            s, g = self.pairs[i]
            return torch.tensor(s), torch.tensor([SOS] + g + [EOS])

    def collate_fn(batch):
        srcs, trgs = zip(*batch)
        src_len = torch.tensor([len(s) for s in srcs], dtype=torch.long)
        return (rnn_utils.pad_sequence(list(srcs), padding_value=PAD), src_len,
                rnn_utils.pad_sequence(list(trgs), padding_value=PAD))

    def init_weights(m):
        for name, param in m.named_parameters():
            if 'weight' in name:
                nn.init.normal_(param.data, mean=0, std=0.01)
            else:
                nn.init.constant_(param.data, 0)

    model = Seq2Seq(Encoder(), BahdanauDecoder() if attention == "bahdanau" else LuongDecoder())
    model.apply(init_weights)
    _init(torch, model, 3, 0.3)
    log(f'The model has {sum(p.numel() for p in model.parameters() if p.requires_grad):,} trainable parameters')
    optimizer = t.optim.Adam(model.parameters(), lr=0.02)
    scheduler = t.sched.StepLR(optimizer, step_size=1, gamma=0.5)
    criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    train_loader = t.data.DataLoader(PairDataset(_pairs(8, 0)), batch_size=4, shuffle=False, collate_fn=collate_fn)
    valid_loader = t.data.DataLoader(PairDataset(_pairs(4, 1)), batch_size=4, collate_fn=collate_fn)

    def train(iterator, clip):
        model.train()
        epoch_loss = 0
        for src, src_len, trg in iterator:
            optimizer.zero_grad()
            output = model(src, src_len, trg)
            loss = criterion(output[1:].view(-1, output.shape[-1]), trg[1:].view(-1))
            loss.backward()
            out['norm'].append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip)))
            optimizer.step()
            epoch_loss += loss.item()
            out['loss'].append(loss.item())
        return epoch_loss / len(iterator)

    def evaluate(iterator):
        model.eval()
        epoch_loss = 0
        with torch.no_grad():
            for src, src_len, trg in iterator:
                output = model(src, src_len, trg, 0)
                epoch_loss += criterion(output[1:].reshape(-1, output.shape[-1]), trg[1:].reshape(-1)).item()
        return epoch_loss / len(iterator)

    def translate_sentence(src_tokens, max_len=8):
        model.eval()
        src_tensor = torch.LongTensor(src_tokens).unsqueeze(1)
        with torch.no_grad():
            encoder_outputs, hidden = model.encoder(src_tensor, torch.LongTensor([len(src_tokens)]))
        mask = model.create_mask(src_tensor)
        trg_indexes, attentions = [SOS], torch.zeros(max_len, 1, len(src_tokens))
        for i in range(max_len):
            with torch.no_grad():
                output, hidden, attention = model.decoder(torch.LongTensor([trg_indexes[-1]]), hidden,
                                                          encoder_outputs, mask)
            attentions[i] = attention
            topv, topi = output.topk(1)
            trg_indexes.append(topi.squeeze().item())
            if trg_indexes[-1] == EOS:
                break
        return trg_indexes, attentions[:len(trg_indexes) - 1]

    random.seed(1234)
    for epoch in range(2):
        train_loss = train(train_loader, 1)
        valid_loss = evaluate(valid_loader)
        scheduler.step()
        out['valid'].append(valid_loss)
        out['lr'].append(scheduler.get_last_lr()[0])
        log(f'Epoch: {epoch + 1:02} | Train Loss: {train_loss:.3f} | Train PPL: {math.exp(train_loss):7.3f} | '
            f'Val. PPL: {math.exp(valid_loss):7.3f} | lr {optimizer.param_groups[0]["lr"]}')
    out['translation'], attentions = translate_sentence([3, 4, 5])
    out['attn'], out['attn_rows'] = _np(attentions), _np(attentions.sum(-1))
    torch.save(model.state_dict(), os.path.join(workdir, 'tut-model.pt'))
    model.load_state_dict(torch.load(os.path.join(workdir, 'tut-model.pt')))
    out.update(_params(model))
    return out


# (2) the chatbot tutorial: summed bidirectional outputs over a sorted pack, Luong dot/general/concat scores,
# maskNLLLoss by gather and masked_select, encoder_hidden[:n_layers], two optimizers, greedy search, checkpoint --
def chatbot_script(torch, workdir, log, method="dot"):
    t = _ns(torch)
    nn, F = t.nn, t.F
    V, H, n_layers = 9, 6, 2
    out = {'loss': []}

    class EncoderRNN(nn.Module):
        def __init__(self, hidden_size, embedding, n_layers=1, dropout=0):
            super(EncoderRNN, self).__init__()
            self.n_layers, self.hidden_size, self.embedding = n_layers, hidden_size, embedding
            self.gru = nn.GRU(hidden_size, hidden_size, n_layers, dropout=(0 if n_layers == 1 else dropout),
                              bidirectional=True)

        def forward(self, input_seq, input_lengths, hidden=None):
            packed = nn.utils.rnn.pack_padded_sequence(self.embedding(input_seq), input_lengths)
            outputs, hidden = self.gru(packed, hidden)
            outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs)
            return outputs[:, :, :self.hidden_size] + outputs[:, :, self.hidden_size:], hidden

    class Attn(nn.Module):
        def __init__(self, method, hidden_size):
            super(Attn, self).__init__()
            self.method = method
            if self.method == 'general':
                self.attn = nn.Linear(hidden_size, hidden_size)
            elif self.method == 'concat':
                self.attn = nn.Linear(hidden_size * 2, hidden_size)
                self.v = nn.Parameter(torch.FloatTensor(hidden_size))

        def forward(self, hidden, encoder_outputs):
            if self.method == 'general':
                attn_energies = torch.sum(hidden * self.attn(encoder_outputs), dim=2)
            elif self.method == 'concat':
                energy = self.attn(torch.cat((hidden.expand(encoder_outputs.size(0), -1, -1), encoder_outputs),
                                             2)).tanh()
                attn_energies = torch.sum(self.v * energy, dim=2)
            else:
                attn_energies = torch.sum(hidden * encoder_outputs, dim=2)
            return F.softmax(attn_energies.t(), dim=1).unsqueeze(1)

    class LuongAttnDecoderRNN(nn.Module):
        def __init__(self, attn_model, embedding, hidden_size, output_size, n_layers=1, dropout=0.1):
            super(LuongAttnDecoderRNN, self).__init__()
            self.n_layers, self.embedding = n_layers, embedding
            self.embedding_dropout = nn.Dropout(dropout)
            self.gru = nn.GRU(hidden_size, hidden_size, n_layers, dropout=(0 if n_layers == 1 else dropout))
            self.concat = nn.Linear(hidden_size * 2, hidden_size)
            self.out = nn.Linear(hidden_size, output_size)
            self.attn = Attn(attn_model, hidden_size)

        def forward(self, input_step, last_hidden, encoder_outputs):
            rnn_output, hidden = self.gru(self.embedding_dropout(self.embedding(input_step)), last_hidden)
            context = self.attn(rnn_output, encoder_outputs).bmm(encoder_outputs.transpose(0, 1))
            concat_output = torch.tanh(self.concat(torch.cat((rnn_output.squeeze(0), context.squeeze(1)), 1)))
            return F.softmax(self.out(concat_output), dim=1), hidden

    def maskNLLLoss(inp, target, mask):
        crossEntropy = -torch.log(torch.gather(inp, 1, target.view(-1, 1)).squeeze(1))
        return crossEntropy.masked_select(mask).mean(), mask.sum().item()

    def batch2TrainData(pair_batch):
        pair_batch.sort(key=lambda x: len(x[0]), reverse=True)
        input_batch, output_batch = zip(*pair_batch)
        lengths = torch.tensor([len(indexes) + 1 for indexes in input_batch])
        inp = torch.LongTensor(list(itertools.zip_longest(*[s + [EOS] for s in input_batch], fillvalue=PAD)))
        padList = list(itertools.zip_longest(*[s + [EOS] for s in output_batch], fillvalue=PAD))
        mask = torch.BoolTensor([[0 if token == PAD else 1 for token in seq] for seq in padList])
        return inp, lengths, torch.LongTensor(padList), mask, len(padList)

    embedding = nn.Embedding(V, H)
    encoder = EncoderRNN(H, embedding, n_layers, 0.0)
    decoder = LuongAttnDecoderRNN(method, embedding, H, V, n_layers, 0.0)
    _init(torch, encoder, 41, 0.4)
    _init(torch, decoder, 42, 0.4)
    encoder_optimizer = t.optim.Adam(encoder.parameters(), lr=0.01)
    decoder_optimizer = t.optim.Adam(decoder.parameters(), lr=0.01 * 5.0)
    pairs = _pairs(6, 4, vocab=V)
    random.seed(5)
    for iteration in range(3):
        input_variable, lengths, target_variable, mask, max_target_len = batch2TrainData(
            [list(p) for p in pairs[iteration * 2:iteration * 2 + 3]])
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        loss, print_losses, n_totals = 0, [], 0
        encoder_outputs, encoder_hidden = encoder(input_variable, lengths)
        decoder_input = torch.LongTensor([[SOS for _ in range(input_variable.size(1))]])
        decoder_hidden = encoder_hidden[:decoder.n_layers]
        use_teacher_forcing = random.random() < 0.5
        for t_ in range(max_target_len):
            decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
            if use_teacher_forcing:
                decoder_input = target_variable[t_].view(1, -1)
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = torch.LongTensor([[topi[i][0] for i in range(input_variable.size(1))]])
            mask_loss, nTotal = maskNLLLoss(decoder_output, target_variable[t_], mask[t_])
            loss += mask_loss
            print_losses.append(mask_loss.item() * nTotal)
            n_totals += nTotal
        loss.backward()
        _ = nn.utils.clip_grad_norm_(encoder.parameters(), 50.0)
        _ = nn.utils.clip_grad_norm_(decoder.parameters(), 50.0)
        encoder_optimizer.step()
        decoder_optimizer.step()
        out['loss'].append(sum(print_losses) / n_totals)
        log("Iteration: {}; Percent complete: {:.1f}%; Average loss: {:.4f}".format(
            iteration + 1, (iteration + 1) / 3 * 100, sum(print_losses) / n_totals))

    encoder.eval()
    decoder.eval()
    input_batch = torch.LongTensor([[3, 4, 5, EOS]]).transpose(0, 1)
    with torch.no_grad():
        encoder_outputs, encoder_hidden = encoder(input_batch, torch.tensor([4]))
        decoder_hidden = encoder_hidden[:decoder.n_layers]
        decoder_input = torch.ones(1, 1, device='cpu', dtype=torch.long) * SOS
        all_tokens, all_scores = torch.zeros([0], device='cpu', dtype=torch.long), torch.zeros([0], device='cpu')
        for _ in range(6):
            decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
            decoder_scores, decoder_input = torch.max(decoder_output, dim=1)
            all_tokens = torch.cat((all_tokens, decoder_input), dim=0)
            all_scores = torch.cat((all_scores, decoder_scores), dim=0)
            decoder_input = torch.unsqueeze(decoder_input, 0)
    out['tokens'], out['scores'], out['dtypes'] = all_tokens.tolist(), _np(all_scores), [_dtype(all_tokens),
                                                                                          _dtype(all_scores)]
    torch.save({'en': encoder.state_dict(), 'de': decoder.state_dict(), 'en_opt': encoder_optimizer.state_dict(),
                'de_opt': decoder_optimizer.state_dict(), 'embedding': embedding.state_dict()},
               os.path.join(workdir, '3_checkpoint.tar'))
    checkpoint = torch.load(os.path.join(workdir, '3_checkpoint.tar'))
    out['ckpt_keys'] = sorted(checkpoint)
    out['opt_state_keys'] = sorted(checkpoint['de_opt']['state'][0])
    out.update(_params(encoder, "enc."))
    out.update(_params(decoder, "dec."))
    return out


# (3) nn.Transformer translation: a registered positional-encoding buffer, embeddings scaled by sqrt(d_model),
# triu / generate_square_subsequent_mask masks with bool key padding masks, a Noam LambdaLR, greedy decoding -----
def transformer_script(torch, workdir, log, batch_first=False, dropout=0.0):
    t = _ns(torch)
    nn = t.nn
    V, EMB, NHEAD, FFN, warmup = 11, 8, 2, 16, 2
    out = {'loss': [], 'lr': [], 'val': []}

    class PositionalEncoding(nn.Module):
        def __init__(self, emb_size, dropout, maxlen=32):
            super().__init__()
            den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
            pos = torch.arange(0, maxlen).reshape(maxlen, 1)
            pos_embedding = torch.zeros((maxlen, emb_size))
            pos_embedding[:, 0::2] = torch.sin(pos * den)
            pos_embedding[:, 1::2] = torch.cos(pos * den)
            self.dropout = nn.Dropout(dropout)
            self.register_buffer('pos_embedding', pos_embedding.unsqueeze(0 if batch_first else -2))

        def forward(self, token_embedding):
            if batch_first:
                return self.dropout(token_embedding + self.pos_embedding[:, :token_embedding.size(1)])
            return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])

    class TokenEmbedding(nn.Module):
        def __init__(self, vocab_size, emb_size):
            super(TokenEmbedding, self).__init__()
            self.embedding, self.emb_size = nn.Embedding(vocab_size, emb_size), emb_size

        def forward(self, tokens):
            return self.embedding(tokens.long()) * math.sqrt(self.emb_size)

    class Seq2SeqTransformer(nn.Module):
        def __init__(self):
            super(Seq2SeqTransformer, self).__init__()
            self.transformer = nn.Transformer(d_model=EMB, nhead=NHEAD, num_encoder_layers=2, num_decoder_layers=2,
                                              dim_feedforward=FFN, dropout=dropout, batch_first=batch_first)
            self.generator = nn.Linear(EMB, V)
            self.src_tok_emb, self.tgt_tok_emb = TokenEmbedding(V, EMB), TokenEmbedding(V, EMB)
            self.positional_encoding = PositionalEncoding(EMB, dropout=dropout)

        def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, memory_key_padding_mask):
            outs = self.transformer(self.positional_encoding(self.src_tok_emb(src)),
                                    self.positional_encoding(self.tgt_tok_emb(trg)), src_mask, tgt_mask, None,
                                    src_padding_mask, tgt_padding_mask, memory_key_padding_mask)
            return self.generator(outs)

        def encode(self, src, src_mask):
            return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)

        def decode(self, tgt, memory, tgt_mask):
            return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask)

    def generate_square_subsequent_mask(sz):
        mask = (torch.triu(torch.ones((sz, sz))) == 1).transpose(0, 1)
        return mask.float().masked_fill(mask == 0, float('-inf')).masked_fill(mask == 1, float(0.0))

    def create_mask(src, tgt):
        if batch_first:
            src_mask = torch.zeros((src.shape[1], src.shape[1]), dtype=torch.bool)
            return src_mask, nn.Transformer.generate_square_subsequent_mask(tgt.shape[1]), src == PAD, tgt == PAD
        src_mask = torch.zeros((src.shape[0], src.shape[0])).type(torch.bool)
        return (src_mask, generate_square_subsequent_mask(tgt.shape[0]), (src == PAD).transpose(0, 1),
                (tgt == PAD).transpose(0, 1))

    def collate_fn(batch):
        src_batch = [torch.tensor(s + [EOS]) for s, _ in batch]
        tgt_batch = [torch.cat([torch.tensor([SOS]), torch.tensor(g), torch.tensor([EOS])]) for _, g in batch]
        return (t.rnn.pad_sequence(src_batch, padding_value=PAD, batch_first=batch_first),
                t.rnn.pad_sequence(tgt_batch, padding_value=PAD, batch_first=batch_first))

    def noam(step):
        step = max(step, 1)
        return EMB ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)

    transformer = Seq2SeqTransformer()
    for p in transformer.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    _init(torch, transformer, 5, 0.3)
    out['buffers'] = sorted(n for n, _ in transformer.named_buffers())
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD)
    optimizer = torch.optim.Adam(transformer.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = t.sched.LambdaLR(optimizer, lr_lambda=noam)
    out['lr'].append(scheduler.get_last_lr()[0])
    loader = t.data.DataLoader(_pairs(8, 2, vocab=V), batch_size=4, collate_fn=collate_fn)

    def run_epoch(model, train):
        model.train(train)
        losses = 0
        for src, tgt in loader:
            tgt_input, tgt_out = (tgt[:, :-1], tgt[:, 1:]) if batch_first else (tgt[:-1, :], tgt[1:, :])
            src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
            logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask)
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
            if train:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                scheduler.step()
                out['lr'].append(scheduler.get_last_lr()[0])
                out['loss'].append(loss.item())
            losses += loss.item()
        return losses / len(list(loader))

    def greedy_decode(model, src, src_mask, max_len, start_symbol):
        memory = model.encode(src, src_mask)
        ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long)
        for i in range(max_len - 1):
            if batch_first:
                tgt_mask = torch.tril(torch.ones(ys.size(1), ys.size(1), dtype=torch.bool)).logical_not()
            else:
                tgt_mask = (generate_square_subsequent_mask(ys.size(0)).type(torch.bool))
            out_ = model.decode(ys, memory, tgt_mask)
            prob = model.generator((out_ if batch_first else out_.transpose(0, 1))[:, -1])
            _, next_word = torch.max(prob, dim=1)
            next_word = next_word.item()
            ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=1 if batch_first else 0)
            if next_word == EOS:
                break
        return ys

    for epoch in range(1, 3):
        train_loss = run_epoch(transformer, True)
        with torch.no_grad():
            val_loss = run_epoch(transformer, False)
        out['val'].append(val_loss)
        log(f"Epoch: {epoch}, Train loss: {train_loss:.3f}, Val loss: {val_loss:.3f}")
    transformer.eval()
    src = torch.tensor([3, 4, 5, EOS]).view(1, -1) if batch_first else torch.tensor([3, 4, 5, EOS]).view(-1, 1)
    with torch.no_grad():
        tgt_tokens = greedy_decode(transformer, src, torch.zeros(4, 4).type(torch.bool), 9, SOS).flatten()
        src, _ = collate_fn(_pairs(3, 6, vocab=V))
        padding = (src == PAD) if batch_first else (src == PAD).transpose(0, 1)
        memory = transformer.transformer.encoder(transformer.positional_encoding(transformer.src_tok_emb(src)),
                                                 src_key_padding_mask=padding)
    out['decoded'], out['decoded_dtype'] = tgt_tokens.tolist(), _dtype(tgt_tokens)
    out['memory'], out['padding'] = _np(memory), padding.numpy()
    out.update(_params(transformer))
    return out


SCRIPTS = {"seq2seq": seq2seq_script, "chatbot": chatbot_script, "transformer": transformer_script}
_MISMATCH = "Support for mismatched key_padding_mask and attn_mask is deprecated. Use same type for both instead."
_NOT_NESTED = ("enable_nested_tensor is True, but self.use_nested_tensor is False because encoder_layer.self_attn."
               "batch_first was not True(use batch_first for better inference performance)")


def run(torch, script, tmp_path, default_dtype=None, **kw):
    """Run ``script`` on ``torch`` (either framework): its outputs plus the printed log and the warnings."""
    workdir = tmp_path / torch.__name__
    workdir.mkdir(exist_ok=True)
    lines = []
    before = torch.get_default_dtype()
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if default_dtype is not None:
                torch.set_default_dtype(getattr(torch, default_dtype))
            out = script(torch, str(workdir), lines.append, **kw)
        finally:
            torch.set_default_dtype(before)
    out["printed"] = "\n".join(lines)
    out["warnings"] = [str(w.message).replace(torch.__name__, "torch") for w in caught]
    return out


def check_common(out):
    """Finite losses over a few steps and finite final parameters."""
    assert np.all(np.isfinite(out["loss"])) and len(out["loss"]) >= 2
    assert all(np.all(np.isfinite(v)) for k, v in out.items() if k.startswith(("p.", "enc.", "dec.")))


def _sanity(name, out, **kw):
    """What each script must show on its own, torch or not."""
    check_common(out)
    if name == "seq2seq":
        assert out["translation"][0] == SOS and all(isinstance(v, int) for v in out["translation"])
        np.testing.assert_allclose(out["attn_rows"], 1.0, rtol=1e-5)
        np.testing.assert_allclose(out["lr"], [0.01, 0.005])
        assert all(n > 0 for n in out["norm"]) and out["warnings"] == []
    elif name == "chatbot":
        assert len(out["tokens"]) == 6 and out["dtypes"] == ["int64", kw.get("default_dtype", "float32")]
        assert np.all((out["scores"] > 0) & (out["scores"] <= 1))
        assert out["ckpt_keys"] == ["de", "de_opt", "embedding", "en", "en_opt"]
        assert out["opt_state_keys"] == ["exp_avg", "exp_avg_sq", "step"] and out["warnings"] == []
    elif name == "transformer":
        noam = [8 ** -0.5 * min(max(s, 1) ** -0.5, max(s, 1) * 2 ** -1.5) for s in range(len(out["lr"]))]
        np.testing.assert_allclose(out["lr"], noam, rtol=1e-12)   # lr 1.0 times the lambda of each step
        assert out["buffers"] == ["positional_encoding.pos_embedding"] and out["decoded_dtype"] == "int64"
        assert out["decoded"][0] == SOS and len(out["decoded"]) <= 9
        # a float causal mask with bool key padding masks: one deprecation warning per decoder self-attention
        # (2 layers, 2 epochs of 2 training and 2 evaluation batches); two when the script's float32 mask
        # meets float64 activations, whose converted padding mask is then float64
        twice = kw.get("default_dtype") == "float64" and not kw.get("batch_first")
        expected = [_MISMATCH] * (2 * 2 * (2 + 2) * (2 if twice else 1))
        assert out["warnings"] == (expected if kw.get("batch_first") else [_NOT_NESTED] + expected)
        if kw.get("batch_first"):   # the inference path's zeros at padded positions, before the final LayerNorm
            assert out["padding"].any()
            at_padding = out["memory"][out["padding"]]
            norm_of_zero = np.broadcast_to(out["p.transformer.encoder.norm.bias"], at_padding.shape)
            np.testing.assert_allclose(at_padding, norm_of_zero, rtol=1e-6, atol=1e-6)


def compare_with_torch(script, sanity, tmp_path, **kw):
    """Both frameworks from the same weights: the script's own checks on minidl, then equal outputs."""
    torch = pytest.importorskip("torch")
    ours, theirs = run(minidl, script, tmp_path, **kw), run(torch, script, tmp_path, **kw)
    # PyTorch's note on its nested-tensor prototype (once per process) is about its implementation of the
    # inference path, which minidl reproduces without nested tensors
    theirs["warnings"] = [w for w in theirs["warnings"] if not w.startswith("The PyTorch API of nested tensors")]
    sanity(ours)
    assert_same(ours, theirs, script.__name__)


VARIANTS = [("seq2seq", {}), ("seq2seq", dict(attention="luong")), ("chatbot", {}),
            ("chatbot", dict(method="general")), ("chatbot", dict(method="concat")), ("transformer", {}),
            ("transformer", dict(batch_first=True))]


def _id(case):
    return case[0] + "".join(f"-{v}" for v in case[1].values())


@pytest.mark.parametrize("case", VARIANTS, ids=_id)
def test_script_runs_on_minidl_alone(case, tmp_path):
    name, kw = case
    _sanity(name, run(minidl, SCRIPTS[name], tmp_path, **kw), **kw)


@pytest.mark.parametrize("case", VARIANTS, ids=_id)
def test_script_matches_pytorch_from_the_same_weights(case, tmp_path):
    """The transformer (and the chatbot's general and concat scores) run in float64 on both sides: Adam
    with eps=1e-9 turns the rounding noise of gradients that are zero in exact arithmetic (a bias that
    softmax cancels) into full steps of either sign, so float32 runs part after one step however right
    both frameworks are."""
    name, kw = case
    if name == "transformer" or (name == "chatbot" and kw):
        kw = dict(kw, default_dtype="float64")
    compare_with_torch(SCRIPTS[name], lambda out: _sanity(name, out, **kw), tmp_path, **kw)


@pytest.mark.parametrize("name,kw", [("seq2seq", dict(dropout=0.3)), ("transformer", dict(dropout=0.1))])
def test_script_with_dropout_runs_on_minidl(name, kw, tmp_path):
    """The dropout variants draw their masks from minidl's generator: the scripts' own checks only."""
    _sanity(name, run(minidl, SCRIPTS[name], tmp_path, **kw), **kw)

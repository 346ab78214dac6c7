"""Kokoro's iSTFTNet decoder (upstream ``kokoro/istftnet.py``): the AdaIN residual blocks that the
prosody predictor shares, the harmonic-plus-noise source (``SineGen``, ``SourceModuleHnNSF``), the
generator that upsamples to STFT frames, and ``Decoder``. Module and parameter names are
upstream's; weight-normed convolutions are plain convolutions whose ``weight`` is folded at load
(``FoldWeightNorm``: ``torch._weight_norm``, what upstream computes on every call).

Randomness: the source draws ``torch.rand`` (initial phases of the overtones) and two
``torch.randn_like`` (the additive noise, and the noise branch upstream draws but never uses) from the
row's generator in upstream's order and shapes, so a seeded request replays upstream's seeded run.
``noise=False`` draws nothing and makes the source deterministic (zero initial phases, no noise): what
kokoro-onnx's ONNX export computes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ISTFTNetConfig

#: Output rate of every Kokoro source module (upstream hard-codes it).
SOURCE_RATE = 24000
#: Overtones of the harmonic source above the fundamental, and its voicing threshold in Hz.
HARMONICS = 8
VOICED_THRESHOLD = 10.0
SINE_AMP = 0.1
NOISE_STD = 0.003


def get_padding(kernel_size: int, dilation: int = 1) -> int:
    return int((kernel_size * dilation - dilation) / 2)


class AdaIN1d(nn.Module):
    """Instance norm (with upstream's affine parameters, ones and zeros unless trained) modulated by
    the style: ``(1 + gamma) * norm(x) + beta``."""

    def __init__(self, style_dim: int, num_features: int) -> None:
        super().__init__()
        self.norm = nn.InstanceNorm1d(num_features, affine=True)
        self.fc = nn.Linear(style_dim, num_features * 2)

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        h = self.fc(s)
        h = h.view(h.size(0), h.size(1), 1)
        gamma, beta = torch.chunk(h, chunks=2, dim=1)
        return (1 + gamma) * self.norm(x) + beta


def snake_kokoro(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Upstream's inline Snake: ``x + (1 / a) * sin(a x)^2`` (no epsilon, unlike DAC's)."""
    return x + (1 / alpha) * (torch.sin(alpha * x) ** 2)


def adain_act(norm: AdaIN1d, x: torch.Tensor, s: torch.Tensor, alpha: torch.Tensor | None,
              slope: float = 0.2) -> torch.Tensor:
    """``norm`` then Snake (with ``alpha``) or a leaky ReLU (``slope``): in one pass of the engine's kernel
    on the CPU (``engine.nn.kernels.adain_kernel``: float rounding apart, the same numbers), else upstream's
    passes."""
    from audiocpp.engine.nn.kernels.adain_kernel import LEAKY, SNAKE
    from audiocpp.engine.nn.kernels.adain_kernel import adain_act as fused

    h = norm.fc(s)
    gamma, beta = torch.chunk(h, chunks=2, dim=1)
    out = fused(x, norm.norm.weight, norm.norm.bias, gamma, beta, alpha, norm.norm.eps, slope,
                SNAKE if alpha is not None else LEAKY)
    if out is not None:
        return out
    z = norm(x, s)
    return snake_kokoro(z, alpha) if alpha is not None else F.leaky_relu(z, slope)


class AdaINResBlock1(nn.Module):
    """The generator's residual block: three dilated conv pairs, each behind AdaIN and Snake."""

    def __init__(self, channels: int, kernel_size: int = 3, dilation: tuple[int, ...] = (1, 3, 5),
                 style_dim: int = 64) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel_size, 1, dilation=d, padding=get_padding(kernel_size, d))
            for d in dilation)
        self.convs2 = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel_size, 1, dilation=1, padding=get_padding(kernel_size, 1))
            for _ in dilation)
        self.adain1 = nn.ModuleList(AdaIN1d(style_dim, channels) for _ in dilation)
        self.adain2 = nn.ModuleList(AdaIN1d(style_dim, channels) for _ in dilation)
        self.alpha1 = nn.ParameterList(nn.Parameter(torch.ones(1, channels, 1)) for _ in dilation)
        self.alpha2 = nn.ParameterList(nn.Parameter(torch.ones(1, channels, 1)) for _ in dilation)

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        for c1, c2, n1, n2, a1, a2 in zip(self.convs1, self.convs2, self.adain1, self.adain2,
                                          self.alpha1, self.alpha2):
            xt = c1(adain_act(n1, x, s, a1))
            xt = c2(adain_act(n2, xt, s, a2))
            x = xt + x
        return x


class TorchSTFT(nn.Module):
    """Upstream's complex STFT (``torch.stft`` / ``torch.istft``, centred, periodic Hann window)."""

    def __init__(self, filter_length: int, hop_length: int, win_length: int) -> None:
        super().__init__()
        self.filter_length, self.hop_length, self.win_length = filter_length, hop_length, win_length
        self.register_buffer("window", torch.hann_window(win_length, periodic=True, dtype=torch.float32,
                                                       device="cpu"),
                             persistent=False)

    def transform(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        spec = torch.stft(x, self.filter_length, self.hop_length, self.win_length, window=self.window,
                          return_complex=True)
        return torch.abs(spec), torch.angle(spec)

    def inverse(self, magnitude: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        out = torch.istft(magnitude * torch.exp(phase * 1j), self.filter_length, self.hop_length,
                          self.win_length, window=self.window)
        return out.unsqueeze(-2)


def randn_like(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``torch.randn_like(x)`` drawn from ``generator`` (on the CPU): the draws fill ``x``'s memory order
    (upstream's noise is shaped like a transposed tensor, so the order is not the logical one)."""
    cpu = torch.empty_like(x, device="cpu").normal_(0, 1, generator=generator)
    return cpu.to(x.device)


class SineGen(nn.Module):
    """The harmonic source: the fundamental and ``harmonic_num`` overtones, integrated at 1/upsample
    of the sample rate and interpolated back (upstream's ``flag_for_pulse=False`` path)."""

    def __init__(self, samp_rate: int, upsample_scale: int, harmonic_num: int = 0, sine_amp: float = 0.1,
                 noise_std: float = 0.003, voiced_threshold: float = 0) -> None:
        super().__init__()
        self.sine_amp, self.noise_std = sine_amp, noise_std
        self.harmonic_num, self.dim = harmonic_num, harmonic_num + 1
        self.sampling_rate, self.voiced_threshold = samp_rate, voiced_threshold
        self.upsample_scale = upsample_scale

    def _f02sine(self, f0_values: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        rad_values = (f0_values / self.sampling_rate) % 1
        if generator is not None:
            rand_ini = torch.rand(f0_values.shape[0], f0_values.shape[2], generator=generator)
            rand_ini = rand_ini.to(f0_values.device)
            rand_ini[:, 0] = 0
            rad_values[:, 0, :] = rad_values[:, 0, :] + rand_ini
        rad_values = F.interpolate(rad_values.transpose(1, 2), scale_factor=1 / self.upsample_scale,
                                   mode="linear").transpose(1, 2)
        phase = torch.cumsum(rad_values, dim=1) * 2 * torch.pi
        phase = F.interpolate(phase.transpose(1, 2) * self.upsample_scale, scale_factor=self.upsample_scale,
                              mode="linear").transpose(1, 2)
        return torch.sin(phase)

    def forward(self, f0: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        harmonics = torch.tensor([[list(range(1, self.harmonic_num + 2))]], dtype=torch.float32,
                                 device=f0.device)
        fn = torch.multiply(f0, harmonics)
        sine_waves = self._f02sine(fn, generator) * self.sine_amp
        uv = (f0 > self.voiced_threshold).type(torch.float32)
        if generator is None:
            return sine_waves * uv
        noise_amp = uv * self.noise_std + (1 - uv) * self.sine_amp / 3
        noise = noise_amp * randn_like(sine_waves, generator)
        sine_waves = sine_waves * uv + noise
        # SourceModuleHnNSF then draws its noise branch (shaped like uv), which the generator never
        # reads: drawn all the same, so that the next chunk's draws continue upstream's stream.
        randn_like(uv, generator)
        return sine_waves


class SourceModuleHnNSF(nn.Module):
    def __init__(self, sampling_rate: int, upsample_scale: int, harmonic_num: int = 0,
                 sine_amp: float = 0.1, add_noise_std: float = 0.003, voiced_threshod: float = 0) -> None:
        super().__init__()
        self.l_sin_gen = SineGen(sampling_rate, upsample_scale, harmonic_num, sine_amp, add_noise_std,
                                 voiced_threshod)
        self.l_linear = nn.Linear(harmonic_num + 1, 1)

    def forward(self, f0: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return torch.tanh(self.l_linear(self.l_sin_gen(f0, generator)))


class Generator(nn.Module):
    def __init__(self, style_dim: int, cfg: ISTFTNetConfig) -> None:
        super().__init__()
        rates, kernels = cfg.upsample_rates, cfg.upsample_kernel_sizes
        channel0, n_fft = cfg.upsample_initial_channel, cfg.gen_istft_n_fft
        self.num_kernels, self.num_upsamples = len(cfg.resblock_kernel_sizes), len(rates)
        scale = math.prod(rates) * cfg.gen_istft_hop_size
        self.upsample_scale = scale
        self.m_source = SourceModuleHnNSF(SOURCE_RATE, scale, harmonic_num=HARMONICS, sine_amp=SINE_AMP,
                                          add_noise_std=NOISE_STD, voiced_threshod=VOICED_THRESHOLD)
        self.noise_convs = nn.ModuleList()
        self.noise_res = nn.ModuleList()
        self.ups = nn.ModuleList(
            nn.ConvTranspose1d(channel0 // (2 ** i), channel0 // (2 ** (i + 1)), k, u, padding=(k - u) // 2)
            for i, (u, k) in enumerate(zip(rates, kernels)))
        self.resblocks = nn.ModuleList()
        ch = channel0
        for i in range(len(self.ups)):
            ch = channel0 // (2 ** (i + 1))
            for k, d in zip(cfg.resblock_kernel_sizes, cfg.resblock_dilation_sizes):
                self.resblocks.append(AdaINResBlock1(ch, k, d, style_dim))
            if i + 1 < len(rates):
                stride_f0 = math.prod(rates[i + 1:])
                self.noise_convs.append(nn.Conv1d(n_fft + 2, ch, kernel_size=stride_f0 * 2, stride=stride_f0,
                                                  padding=(stride_f0 + 1) // 2))
                self.noise_res.append(AdaINResBlock1(ch, 7, (1, 3, 5), style_dim))
            else:
                self.noise_convs.append(nn.Conv1d(n_fft + 2, ch, kernel_size=1))
                self.noise_res.append(AdaINResBlock1(ch, 11, (1, 3, 5), style_dim))
        self.post_n_fft = n_fft
        self.conv_post = nn.Conv1d(ch, n_fft + 2, 7, 1, padding=3)
        self.stft = TorchSTFT(n_fft, cfg.gen_istft_hop_size, n_fft)

    def harmonic_source(self, f0_curve: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """The source's STFT (magnitudes then phases) for an F0 curve ``[B, frames]``."""
        f0 = F.interpolate(f0_curve[:, None], scale_factor=float(self.upsample_scale),
                           mode="nearest").transpose(1, 2)
        har_source = self.m_source(f0, generator).transpose(1, 2).squeeze(1)
        har_spec, har_phase = self.stft.transform(har_source)
        return torch.cat([har_spec, har_phase], dim=1)

    def forward(self, x: torch.Tensor, s: torch.Tensor, f0_curve: torch.Tensor,
                generator: torch.Generator | None) -> torch.Tensor:
        har = self.harmonic_source(f0_curve, generator)
        for i in range(self.num_upsamples):
            x = F.leaky_relu(x, negative_slope=0.1)
            x_source = self.noise_res[i](self.noise_convs[i](har), s)
            x = self.ups[i](x)
            if i == self.num_upsamples - 1:
                x = F.pad(x, (1, 0), mode="reflect")
            x = x + x_source
            xs = None
            for j in range(self.num_kernels):
                if xs is None:
                    xs = self.resblocks[i * self.num_kernels + j](x, s)
                else:
                    xs += self.resblocks[i * self.num_kernels + j](x, s)
            x = xs / self.num_kernels
        x = self.conv_post(F.leaky_relu(x))
        spec = torch.exp(x[:, :self.post_n_fft // 2 + 1, :])
        phase = torch.sin(x[:, self.post_n_fft // 2 + 1:, :])
        return self.stft.inverse(spec, phase)


class AdainResBlk1d(nn.Module):
    """The decoder's and the F0/N predictor's residual block (optionally upsampling x2)."""

    def __init__(self, dim_in: int, dim_out: int, style_dim: int = 64, upsample: bool = False) -> None:
        super().__init__()
        self.upsample_type = "half" if upsample else "none"
        self.learned_sc = dim_in != dim_out
        self.conv1 = nn.Conv1d(dim_in, dim_out, 3, 1, 1)
        self.conv2 = nn.Conv1d(dim_out, dim_out, 3, 1, 1)
        self.norm1 = AdaIN1d(style_dim, dim_in)
        self.norm2 = AdaIN1d(style_dim, dim_out)
        if self.learned_sc:
            self.conv1x1 = nn.Conv1d(dim_in, dim_out, 1, 1, 0, bias=False)
        self.pool = (nn.ConvTranspose1d(dim_in, dim_in, kernel_size=3, stride=2, groups=dim_in, padding=1,
                                        output_padding=1) if upsample else nn.Identity())

    def _shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.upsample_type != "none":
            x = F.interpolate(x, scale_factor=2, mode="nearest")
        if self.learned_sc:
            x = self.conv1x1(x)
        return x

    def _residual(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        x = self.pool(adain_act(self.norm1, x, s, None))
        x = self.conv1(x)
        return self.conv2(adain_act(self.norm2, x, s, None))

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return (self._residual(x, s) + self._shortcut(x)) * torch.rsqrt(torch.tensor(2))


#: The decoder's fixed widths (upstream hard-codes them; only its input width follows hidden_dim).
DECODER_WIDTH = 1024
ASR_RES_WIDTH = 64


class Decoder(nn.Module):
    def __init__(self, dim_in: int, style_dim: int, cfg: ISTFTNetConfig) -> None:
        super().__init__()
        wide, res = DECODER_WIDTH, ASR_RES_WIDTH
        self.encode = AdainResBlk1d(dim_in + 2, wide, style_dim)
        self.decode = nn.ModuleList([
            AdainResBlk1d(wide + 2 + res, wide, style_dim),
            AdainResBlk1d(wide + 2 + res, wide, style_dim),
            AdainResBlk1d(wide + 2 + res, wide, style_dim),
            AdainResBlk1d(wide + 2 + res, cfg.upsample_initial_channel, style_dim, upsample=True),
        ])
        self.F0_conv = nn.Conv1d(1, 1, kernel_size=3, stride=2, groups=1, padding=1)
        self.N_conv = nn.Conv1d(1, 1, kernel_size=3, stride=2, groups=1, padding=1)
        self.asr_res = nn.Sequential(nn.Conv1d(dim_in, res, kernel_size=1))
        self.generator = Generator(style_dim, cfg)

    def features(self, asr: torch.Tensor, f0_curve: torch.Tensor, n_curve: torch.Tensor,
                 s: torch.Tensor) -> torch.Tensor:
        """Everything before the generator: ``[B, upsample_initial_channel, 2 * frames]``."""
        f0 = self.F0_conv(f0_curve.unsqueeze(1))
        n = self.N_conv(n_curve.unsqueeze(1))
        x = self.encode(torch.cat([asr, f0, n], dim=1), s)
        asr_res = self.asr_res(asr)
        res = True
        for block in self.decode:
            if res:
                x = torch.cat([x, asr_res, f0, n], dim=1)
            x = block(x, s)
            if block.upsample_type != "none":
                res = False
        return x

    def forward(self, asr: torch.Tensor, f0_curve: torch.Tensor, n_curve: torch.Tensor, s: torch.Tensor,
                generator: torch.Generator | None) -> torch.Tensor:
        return self.generator(self.features(asr, f0_curve, n_curve, s), s, f0_curve, generator)

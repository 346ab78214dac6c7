"""The voice-agent frameworks' own OpenAI TTS services against our server, with a family whose native
rate is 44.1 kHz (the tiny Audio8): Pipecat's ``OpenAITTSService`` in a real pipeline and LiveKit
Agents' ``openai.TTS`` receive 24 kHz frames, and the audio they receive lasts as long as the audio
the server synthesized (``audiocpp_audio_seconds_total``): correctly timed, not played at the wrong
speed. These are the settings docs/integrations.md gives."""

from __future__ import annotations

import asyncio

from .conftest import ServerProcess


def synthesized(server: ServerProcess) -> float:
    return server.metric('audiocpp_audio_seconds_total{model="a8"}')


def test_pipecat_openai_tts_service_gets_24k_frames(rates_server: ServerProcess) -> None:
    from pipecat.frames.frames import EndFrame, Frame, TTSAudioRawFrame, TTSSpeakFrame
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.runner import PipelineRunner
    from pipecat.pipeline.task import PipelineParams, PipelineTask
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.services.openai.tts import OpenAITTSService

    class Collect(FrameProcessor):
        def __init__(self) -> None:
            super().__init__()
            self.frames: list[TTSAudioRawFrame] = []

        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TTSAudioRawFrame):
                self.frames.append(frame)
            await self.push_frame(frame, direction)

    async def go() -> list[TTSAudioRawFrame]:
        tts = OpenAITTSService(api_key=rates_server.client_key, base_url=rates_server.url + "/v1",
                               settings=OpenAITTSService.Settings(model="a8", voice="alloy"))
        collect = Collect()
        task = PipelineTask(Pipeline([tts, collect]), params=PipelineParams(audio_out_sample_rate=24000))
        await task.queue_frames([TTSSpeakFrame("Hello from a Pipecat agent."), EndFrame()])
        await PipelineRunner(handle_sigint=False).run(task)
        return collect.frames

    before = synthesized(rates_server)
    frames = asyncio.run(go())
    seconds = synthesized(rates_server) - before
    assert frames and {f.sample_rate for f in frames} == {24000} and {f.num_channels for f in frames} == {1}
    received = sum(len(f.audio) for f in frames) / 2 / 24000
    assert seconds > 0 and abs(received - seconds) < 2 / 1000, (received, seconds)


def test_livekit_openai_tts_gets_24k_frames(rates_server: ServerProcess) -> None:
    from livekit.plugins import openai as livekit_openai

    async def go() -> list:
        tts = livekit_openai.TTS(model="a8", voice="alloy", base_url=rates_server.url + "/v1",
                                 api_key=rates_server.client_key, response_format="pcm")
        frames = []
        try:
            async with tts.synthesize("Hello from a LiveKit agent.") as stream:
                async for event in stream:
                    frames.append(event.frame)
        finally:
            await tts.aclose()
        return frames

    before = synthesized(rates_server)
    frames = asyncio.run(go())
    seconds = synthesized(rates_server) - before
    assert frames and {f.sample_rate for f in frames} == {24000}
    received = sum(f.samples_per_channel for f in frames) / 24000
    frame = max(f.samples_per_channel for f in frames) / 24000  # LiveKit ends on whole (padded) frames
    assert seconds > 0 and -2 / 1000 < received - seconds <= 2 * frame, (received, seconds)

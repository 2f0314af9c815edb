"""
Animation of an encirclement: agents with ids and trails (failed ones grey), target, circle.

Written as MP4 when ``ffmpeg`` is on the PATH, as a GIF (pillow) otherwise: :func:`animation_file`
picks the name. The video plays ``pace`` simulated seconds per second (at most ``max_frames``
frames), at a size readable on a slide. The static background is rendered once with matplotlib
(Agg); each frame redraws only the moving artists. No rclpy.
"""
from __future__ import annotations

from pathlib import Path
import shutil
import subprocess

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
import numpy as np
from PIL import Image

FAILED_COLOUR = '0.75'
SIZE_INCHES, DPI = 7.2, 100       # 720 x 720 px
FPS = 10
PACE = 3.0                        # simulated seconds per second of video
TRAIL_SECONDS = 10.0              # how much of each agent's past path is drawn
LABELLED_AGENTS_MAX = 40          # more agents than this: no id labels (they would overlap)


def animation_file(stem: str = 'encirclement') -> str:
    """File name of the animation: ``stem.mp4`` when ffmpeg is on the PATH, else ``stem.gif``."""
    return f'{stem}.mp4' if shutil.which('ffmpeg') else f'{stem}.gif'


def frame_indices(times: np.ndarray, max_frames: int, fps: int = FPS,
                  pace: float = PACE) -> np.ndarray:
    """Return the indices of ``times`` shown: ``pace`` sim-s per video s, <= ``max_frames``."""
    if len(times) == 0 or max_frames < 1:
        return np.empty(0, dtype=int)
    span = float(times[-1] - times[0])
    wanted = int(np.ceil(span * fps / pace)) + 1
    count = max(1, min(max_frames, wanted, len(times)))
    return np.unique(np.linspace(0, len(times) - 1, count).astype(int))


def write_animation(path: Path, times: np.ndarray, agent_xy: np.ndarray, live: np.ndarray,
                    target_xy: np.ndarray, radius: float, max_frames: int = 200,
                    fps: int = FPS, labels: list[str] | None = None, title: str = '',
                    pace: float = PACE) -> int:
    """
    Write an animation of a run to ``path`` (``.mp4`` through ffmpeg, or ``.gif``).

    ``agent_xy`` (T, n, 2) with NaN where an agent has no position yet, ``live`` (T, n) bool,
    ``target_xy`` (T, 2), ``labels`` the n agents' ids (default 1..n). Returns the number of
    frames written.
    """
    path = Path(path)
    if path.suffix not in ('.gif', '.mp4'):
        raise ValueError(f'animation must be a .gif or .mp4 file, got {path.name}')
    n = agent_xy.shape[1]
    labels = [str(i + 1) for i in range(n)] if labels is None else [str(x) for x in labels]
    frames = frame_indices(times, max_frames, fps, pace)
    finite = np.concatenate([agent_xy.reshape(-1, 2), target_xy])
    finite = finite[np.isfinite(finite).all(axis=1)]
    low, high = finite.min(axis=0) - radius * 0.3, finite.max(axis=0) + radius * 0.3

    fig = Figure(figsize=(SIZE_INCHES, SIZE_INCHES), dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xlim(low[0], high[0])
    ax.set_ylim(low[1], high[1])
    ax.set_aspect('equal')
    ax.set_xlabel('x [m] (ENU)')
    ax.set_ylabel('y [m] (ENU)')
    ax.grid(True, alpha=0.3)
    if title:
        fig.suptitle(title, fontsize='small')
    ax.set_title(' ')
    fig.tight_layout()
    palette = [f'C{i % 10}' for i in range(n)]
    angle = np.linspace(0.0, 2.0 * np.pi, 120)
    circle, = ax.plot([], [], color='0.5', ls=':', lw=1.0, animated=True)
    trails = [ax.plot([], [], lw=1.2, alpha=0.6, color=palette[i], animated=True)[0]
              for i in range(n)]
    agents = ax.scatter(np.zeros(n), np.zeros(n), s=45, zorder=3, animated=True)
    target, = ax.plot([], [], 'k*', ms=14, animated=True)
    ids = [ax.text(0.0, 0.0, label, fontsize=8, ha='left', va='bottom', animated=True)
           for label in labels] if n <= LABELLED_AGENTS_MAX else []
    clock = ax.text(0.5, 1.01, '', transform=ax.transAxes, ha='center', va='bottom',
                    animated=True)
    offset = 0.015 * float(max(high - low))
    # Axes, ticks and grid are drawn once; each frame only redraws the moving artists on top.
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)
    width, height = canvas.get_width_height()
    with _Encoder(path, width, height, fps) as encoder:
        for frame in frames:
            centre = target_xy[frame]
            circle.set_data(centre[0] + radius * np.cos(angle),
                            centre[1] + radius * np.sin(angle))
            first = int(np.searchsorted(times, times[frame] - TRAIL_SECONDS))
            for i, trail in enumerate(trails):
                trail.set_data(agent_xy[first:frame + 1, i, 0], agent_xy[first:frame + 1, i, 1])
                trail.set_color(palette[i] if live[frame, i] else FAILED_COLOUR)
            agents.set_offsets(np.nan_to_num(agent_xy[frame], nan=np.inf))
            agents.set_color([palette[i] if ok else FAILED_COLOUR
                              for i, ok in enumerate(live[frame])])
            for i, text in enumerate(ids):
                x, y = agent_xy[frame, i]
                text.set_visible(bool(np.isfinite(x) and np.isfinite(y)))
                text.set_position((x + offset, y + offset))
            target.set_data([centre[0]], [centre[1]])
            clock.set_text(f't = {times[frame]:.1f} s   live {int(live[frame].sum())}/{n}')
            canvas.restore_region(background)
            for artist in (circle, *trails, agents, target, *ids, clock):
                ax.draw_artist(artist)
            encoder.add(bytes(canvas.buffer_rgba()))
    return len(frames)


class _Encoder:
    """Collects RGBA frames and writes them as a GIF (pillow) or an MP4 (ffmpeg, H.264)."""

    def __init__(self, path: Path, width: int, height: int, fps: int):
        self.path, self.size, self.fps = path, (width, height), fps
        self.images, self.ffmpeg = [], None
        if path.suffix == '.mp4':
            # yuv420p needs even dimensions; the filter crops one pixel where needed.
            self.ffmpeg = subprocess.Popen(
                [shutil.which('ffmpeg') or 'ffmpeg', '-v', 'error', '-y', '-f', 'rawvideo',
                 '-pix_fmt', 'rgba', '-s', f'{width}x{height}', '-r', str(fps), '-i', '-',
                 '-vf', 'crop=trunc(iw/2)*2:trunc(ih/2)*2', '-pix_fmt', 'yuv420p',
                 '-vcodec', 'libx264', '-f', 'mp4', str(path)],
                stdin=subprocess.PIPE, stderr=subprocess.PIPE)

    def __enter__(self):
        return self

    def add(self, rgba: bytes) -> None:
        if self.ffmpeg is not None:
            self.ffmpeg.stdin.write(rgba)
        else:
            # Fast octree quantization per frame: flat plot colours need no dithering, and
            # pillow's default (median cut) would take most of the time of the whole animation.
            self.images.append(Image.frombuffer('RGBA', self.size, rgba).convert('RGB').quantize(
                colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE))

    def __exit__(self, kind, error, trace):
        if self.ffmpeg is not None:
            _, stderr = self.ffmpeg.communicate()
            if self.ffmpeg.returncode and kind is None:
                raise OSError(f'ffmpeg failed writing {self.path}: '
                              f'{stderr.decode(errors="replace").strip()[-300:]}')
        elif kind is None and self.images:
            self.images[0].save(self.path, format='GIF', save_all=True,
                                append_images=self.images[1:], duration=int(1000 / self.fps),
                                loop=0)
        return False

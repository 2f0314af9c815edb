"""
Animated GIF of an encirclement: agents (failed ones greyed out), target, desired circle.

Frames are subsampled to at most ``max_frames`` so the file stays small; the static
background is rendered once with matplotlib (Agg) and pillow writes the GIF. No rclpy.
"""
from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
import numpy as np
from PIL import Image

LIVE_COLOUR = 'tab:blue'
FAILED_COLOUR = '0.75'


def write_animation(path: Path, times: np.ndarray, agent_xy: np.ndarray, live: np.ndarray,
                    target_xy: np.ndarray, radius: float, max_frames: int = 80,
                    fps: int = 10) -> int:
    """
    Write a GIF of a run.

    ``agent_xy`` (T, n, 2) with NaN where an agent has no position yet, ``live`` (T, n) bool,
    ``target_xy`` (T, 2). Returns the number of frames written.
    """
    frames = np.unique(np.linspace(0, len(times) - 1, min(max_frames, len(times))).astype(int))
    finite = np.concatenate([agent_xy.reshape(-1, 2), target_xy])
    finite = finite[np.isfinite(finite).all(axis=1)]
    low, high = finite.min(axis=0) - radius * 0.3, finite.max(axis=0) + radius * 0.3

    fig = Figure(figsize=(4.5, 4.5), dpi=72)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xlim(low[0], high[0])
    ax.set_ylim(low[1], high[1])
    ax.set_aspect('equal')
    ax.set_xlabel('x [m]')
    ax.set_ylabel('y [m]')
    ax.grid(True, alpha=0.3)
    ax.set_title(' ')
    fig.tight_layout()
    angle = np.linspace(0.0, 2.0 * np.pi, 120)
    circle, = ax.plot([], [], color='0.5', ls=':', lw=1.0, animated=True)
    agents = ax.scatter(np.zeros(agent_xy.shape[1]), np.zeros(agent_xy.shape[1]), s=30,
                        animated=True)
    target, = ax.plot([], [], 'k*', ms=12, animated=True)
    label = ax.text(0.5, 1.01, '', transform=ax.transAxes, ha='center', va='bottom',
                    animated=True)
    # Axes, ticks and grid are drawn once; each frame only redraws the moving artists on top.
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)
    images = []
    for frame in frames:
        centre = target_xy[frame]
        circle.set_data(centre[0] + radius * np.cos(angle), centre[1] + radius * np.sin(angle))
        agents.set_offsets(np.nan_to_num(agent_xy[frame], nan=np.inf))
        agents.set_color([LIVE_COLOUR if ok else FAILED_COLOUR for ok in live[frame]])
        target.set_data([centre[0]], [centre[1]])
        label.set_text(f't = {times[frame]:.1f} s   live {int(live[frame].sum())}/{live.shape[1]}')
        canvas.restore_region(background)
        for artist in (circle, agents, target, label):
            ax.draw_artist(artist)
        images.append(Image.frombuffer('RGBA', canvas.get_width_height(),
                                       bytes(canvas.buffer_rgba())).convert('RGB'))
    images[0].save(path, format='GIF', save_all=True, append_images=images[1:],
                   duration=int(1000 / fps), loop=0)
    return len(frames)

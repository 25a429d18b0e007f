"""A small synthetic image set in the ImageNet TFRecord layout: real JPEG files of generated images.

Each class has its own hue; every image is a noisy field of that hue, of random size and aspect
ratio, with a rectangle of another colour somewhere in it. A network learns the classes from colour
within a few epochs, whatever the crop or flip, which is what the tests and the local run need: a
workload with the real decode-and-crop pipeline whose accuracy rises above chance quickly.
"""

import colorsys

import numpy as np

MIN_SIDE, MAX_SIDE = 48, 128


def class_colour(label, num_classes):
    """An RGB colour (0-255) per class, evenly spaced in hue."""
    red, green, blue = colorsys.hsv_to_rgb(label / num_classes, 0.8, 0.85)
    return np.array([red, green, blue]) * 255.0


def make_image(rng, label, num_classes):
    """A uint8 HxWx3 array: the class colour, noise, and a rectangle of a random colour."""
    height, width = rng.integers(MIN_SIDE, MAX_SIDE + 1, size=2)
    image = np.broadcast_to(class_colour(label, num_classes), (height, width, 3)).copy()
    image *= rng.uniform(0.75, 1.1)  # brightness
    image += rng.normal(0.0, 18.0, size=image.shape)
    top, left = rng.integers(0, height // 2), rng.integers(0, width // 2)
    image[top : top + height // 3, left : left + width // 3] = rng.uniform(0, 255, size=3)
    return np.clip(image, 0, 255).astype(np.uint8)


def generate(count, num_classes, seed):
    """Yield (uint8 image, class index) pairs, classes in a shuffled, balanced order."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(count) % num_classes)
    for label in labels:
        yield make_image(rng, int(label), num_classes), int(label)

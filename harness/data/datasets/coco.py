"""COCO-format detection datasets in their official layouts: COCO 2017, its MLPerf "safe" subset and the
MLPerf OpenImages subset.

    coco/annotations/instances_val2017.json + coco/val2017/<file_name>
    coco_safe/annotations/instances_val2017.json + coco_safe/val2017_safe/<file_name>   (YOLO, 1,525 images)
    openimages/annotations/openimages-mlperf.json + openimages/validation/data/<file_name>

The LoadGen sample index is the order of `images` in the annotation file (as the MLCommons accuracy
scripts assume). Synthetic datasets are drawn in the same layouts: seeded pictures with a few solid
objects whose boxes and categories (the real ids and names) are written as real COCO annotations, so
pycocotools scores them and the real folders can be swapped in with `--source DIR`.

Preprocessing follows the reference's dataset.py: `cv2.imread`, float32, BGR->RGB, INTER_LINEAR
resize to the model's square input. SSD-MobileNet's reference then stores uint8 (truncating), which is
what we store; SSD-ResNet34 and RetinaNet go on in float, and we store the resized pixels rounded to
uint8 (offline preprocessing); the model's normalisation is a per-channel mean subtracted when
a batch is staged (the record's input_mean), the scale being folded into the seeded model's stem.
YOLO's is Ultralytics' LetterBox at 640 (see `letterbox`), stored as uint8 RGB CHW; its /255 is in the graph.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

import cv2
import numpy as np

from harness.core import inbound
from harness.core.errors import DataError
from harness.core.outbound import make_dirs, write_staged
from harness.data.datasets import decode_image
from harness.records.benchmark_record import CocoAnnotation, CocoDocument, CocoImage, DatasetFormat, Listing

if TYPE_CHECKING:
    pass

__all__ = ["COCO", "COCO_CATEGORIES", "COCO_SAFE", "COCO_SAFE_IMAGES", "COCO_VAL_IMAGES", "LETTERBOX_PAD",
           "LETTERBOX_SIZE", "OPENIMAGES", "OPENIMAGES_CATEGORIES", "CocoLayout", "draw_picture", "letterbox",
           "letterbox_geometry", "preprocess_retinanet", "preprocess_rounded", "preprocess_ssd_mobilenet",
           "preprocess_ssd_resnet34", "preprocess_truncated", "preprocess_yolo"]

# COCO 2017: the 80 categories of instances_val2017.json, (id, name, supercategory)
_COCO_GROUPS = (
    ("person", "1 person"),
    ("vehicle", "2 bicycle|3 car|4 motorcycle|5 airplane|6 bus|7 train|8 truck|9 boat"),
    ("outdoor", "10 traffic light|11 fire hydrant|13 stop sign|14 parking meter|15 bench"),
    ("animal", "16 bird|17 cat|18 dog|19 horse|20 sheep|21 cow|22 elephant|23 bear|24 zebra|25 giraffe"),
    ("accessory", "27 backpack|28 umbrella|31 handbag|32 tie|33 suitcase"),
    ("sports", "34 frisbee|35 skis|36 snowboard|37 sports ball|38 kite|39 baseball bat|40 baseball glove|"
               "41 skateboard|42 surfboard|43 tennis racket"),
    ("kitchen", "44 bottle|46 wine glass|47 cup|48 fork|49 knife|50 spoon|51 bowl"),
    ("food", "52 banana|53 apple|54 sandwich|55 orange|56 broccoli|57 carrot|58 hot dog|59 pizza|60 donut|"
             "61 cake"),
    ("furniture", "62 chair|63 couch|64 potted plant|65 bed|67 dining table|70 toilet"),
    ("electronic", "72 tv|73 laptop|74 mouse|75 remote|76 keyboard|77 cell phone"),
    ("appliance", "78 microwave|79 oven|80 toaster|81 sink|82 refrigerator"),
    ("indoor", "84 book|85 clock|86 vase|87 scissors|88 teddy bear|89 hair drier|90 toothbrush"),
)
COCO_CATEGORIES: tuple[tuple[int, str, str], ...] = tuple(
    (int(item.split(" ", 1)[0]), item.split(" ", 1)[1], group)
    for group, items in _COCO_GROUPS for item in items.split("|"))

# The 264 classes of the MLPerf OpenImages subset (tools/openimages_mlperf.sh); ids are their positions,
# 0-based, as the reference's export_to_coco numbers them.
_OPENIMAGES_TEXT = (
    "Airplane|Antelope|Apple|Backpack|Balloon|Banana|Barrel|Baseball bat|Baseball glove|Bee|Beer|Bench|Bicycle|"
    "Bicycle helmet|Bicycle wheel|Billboard|Book|Bookcase|Boot|Bottle|Bowl|Bowling equipment|Box|Boy|Brassiere|"
    "Bread|Broccoli|Bronze sculpture|Bull|Bus|Bust|Butterfly|Cabinetry|Cake|Camel|Camera|Candle|Candy|Cannon|"
    "Canoe|Carrot|Cart|Castle|Cat|Cattle|Cello|Chair|Cheese|Chest of drawers|Chicken|Christmas tree|Coat|"
    "Cocktail|Coffee|Coffee cup|Coffee table|Coin|Common sunflower|Computer keyboard|Computer monitor|"
    "Convenience store|Cookie|Countertop|Cowboy hat|Crab|Crocodile|Cucumber|Cupboard|Curtain|Deer|Desk|Dinosaur|"
    "Dog|Doll|Dolphin|Door|Dragonfly|Drawer|Dress|Drum|Duck|Eagle|Earrings|Egg (Food)|Elephant|Falcon|Fedora|"
    "Flag|Flowerpot|Football|Football helmet|Fork|Fountain|French fries|French horn|Frog|Giraffe|Girl|Glasses|"
    "Goat|Goggles|Goldfish|Gondola|Goose|Grape|Grapefruit|Guitar|Hamburger|Handbag|Harbor seal|Headphones|"
    "Helicopter|High heels|Hiking equipment|Horse|House|Houseplant|Human arm|Human beard|Human body|Human ear|"
    "Human eye|Human face|Human foot|Human hair|Human hand|Human head|Human leg|Human mouth|Human nose|Ice cream|"
    "Jacket|Jeans|Jellyfish|Juice|Kitchen & dining room table|Kite|Lamp|Lantern|Laptop|Lavender (Plant)|Lemon|"
    "Light bulb|Lighthouse|Lily|Lion|Lipstick|Lizard|Man|Maple|Microphone|Mirror|Mixing bowl|Mobile phone|"
    "Monkey|Motorcycle|Muffin|Mug|Mule|Mushroom|Musical keyboard|Necklace|Nightstand|Office building|Orange|Owl|"
    "Oyster|Paddle|Palm tree|Parachute|Parrot|Pen|Penguin|Personal flotation device|Piano|Picture frame|Pig|"
    "Pillow|Pizza|Plate|Platter|Porch|Poster|Pumpkin|Rabbit|Rifle|Roller skates|Rose|Salad|Sandal|Saucer|"
    "Saxophone|Scarf|Sea lion|Sea turtle|Sheep|Shelf|Shirt|Shorts|Shrimp|Sink|Skateboard|Ski|Skull|Skyscraper|"
    "Snake|Sock|Sofa bed|Sparrow|Spider|Spoon|Sports uniform|Squirrel|Stairs|Stool|Strawberry|Street light|"
    "Studio couch|Suit|Sun hat|Sunglasses|Surfboard|Sushi|Swan|Swimming pool|Swimwear|Tank|Tap|Taxi|Tea|"
    "Teddy bear|Television|Tent|Tie|Tiger|Tin can|Tire|Toilet|Tomato|Tortoise|Tower|Traffic light|Train|Tripod|"
    "Truck|Trumpet|Umbrella|Van|Vase|Vehicle registration plate|Violin|Wall clock|Waste container|Watch|Whale|"
    "Wheel|Wheelchair|Whiteboard|Window|Wine|Wine glass|Woman|Zebra|Zucchini")
OPENIMAGES_CATEGORIES: tuple[tuple[int, str, str], ...] = tuple(
    (i, n, "") for i, n in enumerate(_OPENIMAGES_TEXT.split("|")))


@dataclass(frozen=True)
class CocoLayout:
    """One COCO-format dataset: where its annotation file and images are, and its categories."""

    name: str
    annotations: str
    images: str
    categories: tuple[tuple[int, str, str], ...]
    synthetic_name: Callable[[int, np.random.Generator], tuple[int, str]]  # (index, rng) -> (image id, file)
    max_images: int | None = None  # a subset of a larger set: more images than this is the wrong annotation file
    whole_folder: bool = False     # every image in the folder must be annotated (a subset's folder is exactly it)

    def read(self, root: Path, limit: int | None = None) -> Listing:
        """The first `limit` images of the annotation file, their ground truth, and checks that they exist."""
        path = root / self.annotations
        if not path.is_file():
            raise DataError(f"{path} {inbound.absent(path, 'not found')}: a {self.name} folder holds "
                            f"{self.annotations} and {self.images}/")
        try:
            doc = inbound.read_json(path, inbound.ANNOTATIONS)
        except OSError as exc:
            raise DataError(f"{path} is not a COCO annotation file ({exc})") from None
        images, anns = _check_coco(doc, path)
        self._check_subset(root, path, images)
        if limit is not None:
            images = images[:limit]
        missing = [im["file_name"] for im in images if not (root / self.images / im["file_name"]).is_file()]
        if missing:
            raise DataError(f"{len(missing)} image(s) listed in {path} are missing from {root / self.images} "
                            f"(first: {missing[0]}); restore them or pass --samples to use fewer")
        ids = {im["id"] for im in images}
        subset = cast(CocoDocument, {**inbound.expect_object(doc, str(path)), "images": images,  # `_check_coco`ed
                                     "annotations": [a for a in anns if a["image_id"] in ids]})
        return Listing([f"{self.images}/{im['file_name']}" for im in images],
                       np.asarray([im["id"] for im in images], dtype=np.int64), subset)

    def _check_subset(self, root: Path, path: Path, images: list[CocoImage]) -> None:
        """A subset's annotation file lists at most its images, and its folder holds no image it does not list."""
        if self.max_images is not None and len(images) > self.max_images:
            what = "the full COCO val2017 annotation file" if len(images) == COCO_VAL_IMAGES else "not the subset's"
            raise DataError(f"{path} lists {len(images):,} images: {what}; the {self.name} subset lists "
                            f"{self.max_images:,}: use the instances_val2017.json of the MLCommons {self.name} "
                            f"download")
        if not self.whole_folder or not (root / self.images).is_dir():
            return
        listed = {im["file_name"] for im in images}
        extra = sorted(p.name for p in (root / self.images).iterdir() if p.name not in listed)
        if extra:
            raise DataError(f"{len(extra)} image(s) in {root / self.images} are not in {path} (first: {extra[0]}); "
                            f"the folder and its annotations must come from the same {self.name} download")

    def make_synthetic(self, root: Path, count: int, seed: int, on_image: Callable[[], None] | None = None) -> None:
        """`count` seeded JPEGs with drawn objects and their COCO annotations, in the official layout."""
        if self.max_images is not None and count > self.max_images:
            raise DataError(f"the {self.name} subset has {self.max_images:,} images; ask for at most that many "
                            f"(--samples)")
        make_dirs(root / self.images)
        make_dirs((root / self.annotations).parent)
        images: list[CocoImage] = []
        anns: list[CocoAnnotation] = []
        for i in range(count):
            rng = np.random.default_rng([seed, i])  # image i is the same in every size: N images prefix M > N
            image_id, name = self.synthetic_name(i, rng)
            img, objects = draw_picture(rng, [c[0] for c in self.categories])
            ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
            if not ok:
                raise DataError(f"could not encode synthetic image {name}")
            write_staged(root / self.images / name, buf.tobytes())
            images.append({"id": image_id, "file_name": name, "height": img.shape[0], "width": img.shape[1]})
            for cat, box in objects:
                anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": cat, "bbox": box,
                             "area": box[2] * box[3], "iscrowd": 0})
            if on_image:
                on_image()
        doc: CocoDocument = {
            "info": {"description": f"synthetic {self.name} (seed {seed}): drawn objects, not real images"},
            "licenses": [], "images": images, "annotations": anns,
            "categories": [{"id": c, "name": n, "supercategory": s} for c, n, s in self.categories]}
        write_staged(root / self.annotations, json.dumps(doc).encode())

    def format(self) -> DatasetFormat:
        return DatasetFormat(self.name, self.annotations, self.read, self.make_synthetic, prefix_stable=True)


def _check_coco(doc: object, path: Path) -> tuple[list[CocoImage], list[CocoAnnotation]]:
    """The images and annotations of a COCO document, or one line saying what is not COCO about it."""
    def bad(why: str) -> DataError:
        return DataError(f"{path} is not a COCO annotation file: {why}")

    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), list) for k in ("images", "annotations",
                                                                                   "categories")):
        raise bad("it needs the lists `images`, `annotations` and `categories`")
    images, anns = doc["images"], doc["annotations"]
    for im in images:
        if not isinstance(im, dict) or not {"id", "file_name", "height", "width"} <= im.keys():
            raise bad(f"image entry {str(im)[:80]} lacks id, file_name, height or width")
    if not images:
        raise bad("it lists no images")
    ids = {im["id"] for im in images}
    if len(ids) != len(images):
        raise bad("image ids repeat")
    cats = {c.get("id") for c in doc["categories"] if isinstance(c, dict)}
    for a in anns:
        if not isinstance(a, dict) or not {"image_id", "category_id", "bbox"} <= a.keys() \
                or not isinstance(a["bbox"], list) or len(a["bbox"]) != 4:
            raise bad(f"annotation {str(a)[:80]} lacks image_id, category_id or a 4-number bbox")
        if a["image_id"] not in ids:
            raise bad(f"annotation {a.get('id')} refers to image {a['image_id']}, which is not in `images`")
        if a["category_id"] not in cats:
            raise bad(f"annotation {a.get('id')} has category {a['category_id']}, which is not in `categories`")
    return images, anns


def draw_picture(rng: np.random.Generator, categories: list[int]) -> tuple[np.ndarray, list[tuple[int, list[float]]]]:
    """A smooth colour field with 1-6 solid rectangles or ellipses; each object's category and box (the synthetic
    dataset's pictures, and the yolo model's calibration batch)."""
    h, w = (int(v) for v in rng.integers(240, 641, 2))
    coarse = rng.integers(0, 256, (int(rng.integers(2, 6)), int(rng.integers(2, 6)), 3)).astype(np.uint8)
    img = cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC)
    objects = []
    for _ in range(int(rng.integers(1, 7))):
        bw, bh = int(w * rng.uniform(0.08, 0.6)), int(h * rng.uniform(0.08, 0.6))
        x0, y0 = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        if rng.random() < 0.5:
            cv2.rectangle(img, (x0, y0), (x0 + bw - 1, y0 + bh - 1), colour, -1)
        else:
            cv2.ellipse(img, (x0 + bw // 2, y0 + bh // 2), (bw // 2, bh // 2), 0, 0, 360, colour, -1)
        objects.append((int(rng.choice(categories)), [float(x0), float(y0), float(bw), float(bh)]))
    noise = rng.normal(0, 5, img.shape)
    img = np.clip(img + noise, 0, 255).astype(np.uint8)
    if rng.random() < 0.04:
        img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    return img, objects


def _coco_name(i: int, rng: np.random.Generator) -> tuple[int, str]:
    """Sparse, unordered, unique image ids and zero-padded file names, as in instances_val2017.json."""
    image_id = 1 + i * 7919 % 599_999  # 7919 is prime to 599,999: unique for every i below it
    return image_id, f"{image_id:012d}.jpg"


def _openimages_name(i: int, rng: np.random.Generator) -> tuple[int, str]:
    """Ids 1..N and 16-hex-digit file names, as the reference's export writes them."""
    return i + 1, f"{int(rng.integers(0, 2**63)):016x}.jpg"


COCO = CocoLayout("coco", "annotations/instances_val2017.json", "val2017", COCO_CATEGORIES, _coco_name)
COCO_VAL_IMAGES = 5000
COCO_SAFE_IMAGES = 1525  # mlcommons/inference vision/classification_and_detection/yolo/README.md
COCO_SAFE = CocoLayout("coco_safe", "annotations/instances_val2017.json", "val2017_safe", COCO_CATEGORIES,
                       _coco_name, max_images=COCO_SAFE_IMAGES, whole_folder=True)
OPENIMAGES = CocoLayout("openimages", "annotations/openimages-mlperf.json", "validation/data",
                        OPENIMAGES_CATEGORIES, _openimages_name)


def _resized(path: Path, size: int, listed_in: str) -> np.ndarray:
    """The reference's `maybe_resize`: float32, BGR->RGB, INTER_LINEAR to size x size (HWC)."""
    img = cv2.cvtColor(decode_image(path, listed_in).astype(np.float32), cv2.COLOR_BGR2RGB)
    resized: np.ndarray = cv2.resize(img, (size, size), interpolation=cv2.INTER_LINEAR)
    return resized


def preprocess_truncated(path: Path, size: int, listed_in: str) -> np.ndarray:
    """`pre_process_coco_mobilenet`: resized pixels cast to uint8 (numpy truncates), CHW."""
    return np.ascontiguousarray(_resized(path, size, listed_in).astype(np.uint8).transpose(2, 0, 1))


def preprocess_rounded(path: Path, size: int, listed_in: str) -> np.ndarray:
    """SSD-ResNet34 / RetinaNet: the reference's float resize, stored as the nearest uint8, CHW."""
    img = np.clip(np.rint(_resized(path, size, listed_in)), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(img.transpose(2, 0, 1))


preprocess_ssd_mobilenet = partial(preprocess_truncated, size=300, listed_in=COCO.annotations)
preprocess_ssd_resnet34 = partial(preprocess_rounded, size=1200, listed_in=COCO.annotations)
preprocess_retinanet = partial(preprocess_rounded, size=800, listed_in=OPENIMAGES.annotations)


# ------------------------------------------------------------------------------------------------
# YOLO: Ultralytics' LetterBox, as its predictor applies it to an image read with cv2.imread

LETTERBOX_SIZE = 640
LETTERBOX_PAD = 114


def letterbox(img: np.ndarray, size: int = LETTERBOX_SIZE) -> np.ndarray:
    """LetterBox((size, size), auto=False, scaleup=True, center=True): scale by the longer side
    (r = size / max(h, w)), INTER_LINEAR resize to round(w r) x round(h r), pad with 114 centred (the odd
    pixel of padding goes to the bottom / right). HWC in, HWC out, same channel order."""
    h, w = img.shape[:2]
    r = min(size / h, size / w)
    nw, nh = max(round(w * r), 1), max(round(h * r), 1)  # a thin image keeps at least 1 pixel
    if (nw, nh) != (w, h):
        img = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    dw, dh = (size - nw) / 2, (size - nh) / 2
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    return cv2.copyMakeBorder(img, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(LETTERBOX_PAD,) * 3)


def letterbox_geometry(height: int, width: int, size: int = LETTERBOX_SIZE) -> tuple[float, float, int, int]:
    """(gain_x, gain_y, pad_x, pad_y) of an image's letterbox, as Ultralytics' scale_boxes recomputes them
    to map boxes back (per axis, from the rounded resized sides): original x = (x - pad_x) / gain_x, then
    clipped to the image."""
    gain = min(size / height, size / width)
    new_h, new_w = max(round(height * gain), 1), max(round(width * gain), 1)
    return new_w / width, new_h / height, round((size - new_w) / 2 - 0.1), round((size - new_h) / 2 - 0.1)


def preprocess_yolo(path: Path) -> np.ndarray:
    """cv2.imread (BGR), letterbox to 640x640, BGR->RGB, uint8 CHW: the predictor's steps before its /255."""
    img = letterbox(decode_image(path, COCO_SAFE.annotations))
    return np.ascontiguousarray(img[:, :, ::-1].transpose(2, 0, 1))

/**
 * The map: Leaflet without a basemap (the machines have no internet), the fields' outlines, and the
 * index overlay from the tile endpoint. Tiles are fetched with the API key in a header (an <img src>
 * cannot send one and the key never goes in a URL), then shown from object URLs.
 */
import L from 'leaflet';
import { apiBlobUrl, Problem } from './api.js';

export interface FieldFeature {
  id: string;
  name: string;
  boundary: GeoJSON.Polygon | GeoJSON.MultiPolygon;
  bbox: [number, number, number, number];
}

const AuthTiles = L.GridLayer.extend({
  createTile(
    this: L.GridLayer & { options: { template: string; onTileError: (e: unknown) => void } },
    coords: L.Coords,
    done: L.DoneCallback,
  ) {
    const img = document.createElement('img');
    img.alt = '';
    const url = this.options.template
      .replace('{z}', String(coords.z))
      .replace('{x}', String(coords.x))
      .replace('{y}', String(coords.y));
    apiBlobUrl(url).then(
      (src) => {
        if (src) {
          img.onload = () => {
            URL.revokeObjectURL(src);
            img.dataset.loaded = 'true';
            done(undefined, img);
          };
          img.src = src;
        } else {
          img.dataset.loaded = 'empty';
          done(undefined, img);
        }
      },
      (err: unknown) => {
        img.dataset.loaded = 'failed';
        this.options.onTileError(err);
        done(err as Error, img);
      },
    );
    return img;
  },
});

export class FieldMap {
  readonly map: L.Map;
  private outlines = new Map<string, L.GeoJSON>();
  private overlay: L.GridLayer | null = null;

  constructor(el: HTMLElement, onSelect: (id: string) => void) {
    this.map = L.map(el, { attributionControl: false, zoomSnap: 0.25, keyboard: true, fadeAnimation: false }).setView(
      [50, 5],
      5,
    );
    this.onSelect = onSelect;
  }
  private onSelect: (id: string) => void;

  setFields(fields: FieldFeature[]): void {
    for (const l of this.outlines.values()) l.remove();
    this.outlines.clear();
    for (const f of fields) {
      const layer = L.geoJSON(f.boundary, { style: { color: '#1f5fa8', weight: 2, fillOpacity: 0.08 } })
        .bindTooltip(f.name)
        .on('click', () => this.onSelect(f.id))
        .addTo(this.map);
      this.outlines.set(f.id, layer);
    }
    if (fields.length) {
      const b = L.latLngBounds(
        fields.flatMap((f) => [[f.bbox[1], f.bbox[0]] as L.LatLngTuple, [f.bbox[3], f.bbox[2]] as L.LatLngTuple]),
      );
      this.map.fitBounds(b, { padding: [20, 20], maxZoom: 15 });
    }
  }

  select(f: FieldFeature): void {
    for (const [id, l] of this.outlines)
      l.setStyle(
        id === f.id
          ? { color: '#d9480f', weight: 3, fillOpacity: 0 }
          : { color: '#1f5fa8', weight: 2, fillOpacity: 0.08 },
      );
    this.map.fitBounds(
      [
        [f.bbox[1], f.bbox[0]],
        [f.bbox[3], f.bbox[2]],
      ],
      { padding: [16, 16] },
    );
  }

  /** Shows the tiles of a TileJSON document (its first template), within its bounds and zoom levels. */
  showOverlay(
    tilejson: { tiles: string[]; bounds?: number[]; minzoom?: number; maxzoom?: number },
    onTileError: (e: unknown) => void,
  ): void {
    this.clearOverlay();
    const template = new URL(tilejson.tiles[0]!, location.href);
    const [w, s, e, n] = tilejson.bounds ?? [-180, -85, 180, 85];
    this.overlay = new (AuthTiles as unknown as new (o: object) => L.GridLayer)({
      template:
        template.pathname.replace(/%7B/g, '{').replace(/%7D/g, '}') +
        template.search.replace(/%7B/g, '{').replace(/%7D/g, '}'),
      bounds: L.latLngBounds([s!, w!], [n!, e!]),
      minZoom: 0,
      minNativeZoom: tilejson.minzoom ?? 0,
      maxNativeZoom: tilejson.maxzoom ?? 22,
      maxZoom: 22,
      opacity: 0.9,
      zIndex: 5,
      tileSize: 256,
      className: 'index-overlay',
      onTileError: (err: unknown) =>
        onTileError(err instanceof Problem ? err : new Problem('A map tile failed', String(err), 0)),
    }).addTo(this.map);
    for (const l of this.outlines.values()) l.bringToFront();
  }

  clearOverlay(): void {
    this.overlay?.remove();
    this.overlay = null;
  }

  resize(): void {
    this.map.invalidateSize();
  }
}

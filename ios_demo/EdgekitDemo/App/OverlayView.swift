import CoreGraphics
import Foundation
import SwiftUI

/// Image pixels to view points as `.resizeAspectFill` shows the frame (scaled to cover the view, centred).
private struct ImageToView {
    let scale: CGFloat
    let dx: CGFloat
    let dy: CGFloat

    init(view: CGSize, image: CGSize) {
        scale = image.width > 0 && image.height > 0 ? max(view.width / image.width, view.height / image.height) : 0
        dx = (view.width - image.width * scale) / 2
        dy = (view.height - image.height * scale) / 2
    }

    func point(_ p: CGPoint) -> CGPoint { CGPoint(x: dx + p.x * scale, y: dy + p.y * scale) }

    func rect(_ r: CGRect) -> CGRect {
        CGRect(x: dx + r.minX * scale, y: dy + r.minY * scale, width: r.width * scale, height: r.height * scale)
    }
}

/// The mask layer, boxes (OCR's rotated quads as closed paths) and text over the preview, all in image
/// pixels mapped through one `ImageToView`.
struct OverlayView: View {
    let overlay: Overlay

    var body: some View {
        GeometryReader { geometry in
            let size = geometry.size
            let toView = ImageToView(view: size, image: overlay.imageSize)
            ZStack(alignment: .topLeading) {
                if let mask = overlay.mask {
                    // the mask is in image pixels: stretched onto the image's rect, nearest neighbour as the core resizes
                    let r = toView.rect(CGRect(origin: .zero, size: overlay.imageSize))
                    Image(decorative: mask.image, scale: 1)
                        .resizable()
                        .interpolation(.none)
                        .frame(width: r.width, height: r.height)
                        .offset(x: r.minX, y: r.minY)
                        .frame(width: size.width, height: size.height, alignment: .topLeading)
                        .clipped()
                }
                ForEach(overlay.boxes) { box in
                    if let quad = box.quad {
                        let corners = quad.map { toView.point($0) }
                        Path { path in
                            path.addLines(corners)
                            path.closeSubpath()
                        }
                        .stroke(Color.green, lineWidth: 2)
                        Text(box.text)  // near the first corner (the top-left one of PaddleOCR's clockwise order)
                            .font(.caption)
                            .foregroundColor(.white)
                            .shadow(radius: 2)
                            .offset(x: corners[0].x, y: corners[0].y - 18)
                    } else {
                        let r = toView.rect(box.rect)
                        Rectangle()
                            .stroke(Color.green, lineWidth: 2)
                            .frame(width: r.width, height: r.height)
                            .offset(x: r.minX, y: r.minY)
                        Text(box.text)
                            .font(.caption)
                            .foregroundColor(.white)
                            .shadow(radius: 2)
                            .offset(x: r.minX, y: r.minY - 18)
                    }
                }
                if let headline = overlay.headline {
                    Text(headline)
                        .font(.system(size: 34, weight: .bold))
                        .foregroundColor(.white)
                        .shadow(radius: 3)
                        .padding(.top, 60)
                        .padding(.leading, 16)
                }
            }
        }
        .allowsHitTesting(false)
    }
}

extension OverlayMask {
    /// One colour per class, alpha 0.45; class 0 is background and stays clear (as camera_demo's draw_mask).
    private static let palette: [(UInt8, UInt8, UInt8)] = [
        (0xE6, 0x19, 0x4B), (0x3C, 0xB4, 0x4B), (0xFF, 0xE1, 0x19), (0x43, 0x63, 0xD8),
        (0xF5, 0x82, 0x31), (0x91, 0x1E, 0xB4), (0x46, 0xF0, 0xF0), (0xF0, 0x32, 0xE6),
    ]
    private static let alpha: UInt8 = 115  // 0.45 * 255

    /// The class map (row-major, `width` x `height`) as a premultiplied RGBA image.
    static func colourLayer(_ classes: [UInt8], width: Int, height: Int) -> CGImage? {
        guard classes.count == width * height else { return nil }
        var colours = [UInt8](repeating: 0, count: 256 * 4)  // premultiplied RGBA per class; class 0 all zero
        for c in 1..<256 {
            let (r, g, b) = palette[(c - 1) % palette.count]
            colours[4 * c] = UInt8(Int(r) * Int(alpha) / 255)
            colours[4 * c + 1] = UInt8(Int(g) * Int(alpha) / 255)
            colours[4 * c + 2] = UInt8(Int(b) * Int(alpha) / 255)
            colours[4 * c + 3] = alpha
        }
        var pixels = [UInt8](repeating: 0, count: classes.count * 4)
        for (i, c) in classes.enumerated() where c != 0 {
            let from = 4 * Int(c), to = 4 * i
            pixels[to] = colours[from]
            pixels[to + 1] = colours[from + 1]
            pixels[to + 2] = colours[from + 2]
            pixels[to + 3] = colours[from + 3]
        }
        guard let provider = CGDataProvider(data: Data(pixels) as CFData) else { return nil }
        return CGImage(width: width, height: height, bitsPerComponent: 8, bitsPerPixel: 32, bytesPerRow: 4 * width,
                       space: CGColorSpaceCreateDeviceRGB(),
                       bitmapInfo: CGBitmapInfo(rawValue: CGImageAlphaInfo.premultipliedLast.rawValue),
                       provider: provider, decode: nil, shouldInterpolate: false, intent: .defaultIntent)
    }
}
